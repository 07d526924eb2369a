#include "server/disconnect_watcher.h"

#include <dirent.h>
#include <netdb.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace ds::server {

namespace {

// Address and port of a socket end, formatted as httplib formats Request::remote_addr.
bool end_of(int fd, bool peer, std::string& addr, int& port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc != 0) return false;
  if (ss.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  } else {
    return false;
  }
  char host[NI_MAXHOST];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
    return false;
  addr = host;
  return true;
}

}  // namespace

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

int DisconnectWatcher::find_socket(int local_port, const std::string& remote_addr, int remote_port) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    struct stat st {};
    if (::fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    std::string raddr, laddr;
    int rport = -1, lport = -1;
    if (!end_of(static_cast<int>(fd), true, raddr, rport) || rport != remote_port || raddr != remote_addr)
      continue;
    // The remote end plus the local port name the connection; the local address is not
    // compared because a wildcard listener may see it spelled differently.
    if (!end_of(static_cast<int>(fd), false, laddr, lport) || lport != local_port) continue;
    found = static_cast<int>(fd);
    break;
  }
  ::closedir(dir);
  return found;
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
