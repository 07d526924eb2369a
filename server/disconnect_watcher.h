// DisconnectWatcher: notices when an HTTP client goes away while its request is generating,
// so the server can cancel it at once (streaming or not) instead of computing for nobody.
//
// A handler that waits for the engine writes nothing for a long time (a non-streaming reply
// writes only at the end), so a failed write would reveal a departed client too late.
//  * watch() registers the request's socket (HttpRequest::socket) with one epoll set for
//    EPOLLRDHUP/EPOLLHUP/EPOLLERR only (never EPOLLIN, so a pipelined request is not mistaken
//    for a hang-up); one thread waits on the set and runs the callback when the peer closes
//    or resets the connection. The callback cancels the request in the engine; the engine
//    drops it at its next iteration. The transport keeps the socket open until the reply is
//    written and the handler's state released (http_transport.h).
//  * unwatch() must be called before the handler's reply is released; it waits for a
//    callback that is running for that registration, so nothing the callback touches can go
//    away under it.
// A client that half-closes its sending side after the request (shutdown(SHUT_WR)) counts as
// gone, as it does for uvicorn-based servers.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace ds::server {

class DisconnectWatcher {
 public:
  DisconnectWatcher();  // throws std::runtime_error when epoll is unavailable
  ~DisconnectWatcher();
  DisconnectWatcher(const DisconnectWatcher&) = delete;
  DisconnectWatcher& operator=(const DisconnectWatcher&) = delete;

  using Token = uint64_t;
  // 0 when fd < 0 or it cannot be watched (then only a failed write reveals a disconnect).
  Token watch(int fd, std::function<void()> on_disconnect);
  void unwatch(Token token);

  size_t watched() const;

 private:
  void run();

  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd that ends run()
  mutable std::mutex mu_;
  struct Entry {
    int fd;
    std::function<void()> callback;
  };
  std::unordered_map<Token, Entry> entries_;
  Token next_token_ = 1;
  std::thread thread_;
};

}  // namespace ds::server
