#include "server/disconnect_watcher.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ds::server {

DisconnectWatcher::DisconnectWatcher() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw std::runtime_error(std::string("epoll_create1: ") + std::strerror(errno));
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    ::close(epoll_fd_);
    throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // token 0 = the wake-up
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  thread_ = std::thread([this] { run(); });
}

DisconnectWatcher::~DisconnectWatcher() {
  const uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

DisconnectWatcher::Token DisconnectWatcher::watch(int fd, std::function<void()> on_disconnect) {
  if (fd < 0) return 0;
  std::lock_guard lock(mu_);
  const Token token = next_token_++;
  epoll_event ev{};
  ev.events = EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLONESHOT;
  ev.data.u64 = token;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return 0;
  entries_.emplace(token, Entry{fd, std::move(on_disconnect)});
  return token;
}

void DisconnectWatcher::unwatch(Token token) {
  if (token == 0) return;
  std::lock_guard lock(mu_);  // also waits for a running callback of this token
  auto it = entries_.find(token);
  if (it == entries_.end()) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.fd, nullptr);
  entries_.erase(it);
}

size_t DisconnectWatcher::watched() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void DisconnectWatcher::run() {
  epoll_event events[64];
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_, events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < n; ++i) {
      const Token token = events[i].data.u64;
      if (token == 0) return;
      std::lock_guard lock(mu_);
      auto it = entries_.find(token);
      if (it == entries_.end()) continue;  // unwatched meanwhile
      // One-shot: the registration stays (disarmed) until unwatch() deletes it.
      if (it->second.callback) it->second.callback();
      it->second.callback = nullptr;
    }
  }
}

}  // namespace ds::server
