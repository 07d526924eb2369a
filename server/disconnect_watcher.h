// DisconnectWatcher: notices when an HTTP client goes away while its request is generating,
// so the server can cancel it at once (streaming or not) instead of computing for nobody.
//
// cpp-httplib 0.11 (Debian 12's) gives a handler neither its socket nor a working liveness
// check: DataSink::is_writable() only select()s for writability, which a closed connection
// also passes, and a non-streaming handler writes nothing until it is done. So:
//  * find_socket() finds the connection's descriptor among the process's open sockets by
//    its address pair (httplib reports both ends in the Request), the same way httplib
//    formats them; the descriptor stays ours while the handler runs, because httplib closes
//    it only after the handler (and its content provider) has returned;
//  * watch() registers it with one epoll set for EPOLLRDHUP/EPOLLHUP/EPOLLERR only (never
//    EPOLLIN, so a pipelined request is not mistaken for a hang-up); one thread waits on the
//    set and runs the callback when the peer closes or resets the connection. The callback
//    cancels the request in the engine; the engine drops it at its next iteration.
//  * unwatch() must be called before the handler returns; it waits for a callback that is
//    running for that registration, so nothing the callback touches can go away under it.
// A client that half-closes its sending side after the request (shutdown(SHUT_WR)) counts as
// gone, as it does for uvicorn-based servers.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace ds::server {

class DisconnectWatcher {
 public:
  DisconnectWatcher();  // throws std::runtime_error when epoll is unavailable
  ~DisconnectWatcher();
  DisconnectWatcher(const DisconnectWatcher&) = delete;
  DisconnectWatcher& operator=(const DisconnectWatcher&) = delete;

  // The descriptor of the TCP connection with these ends, or -1.
  static int find_socket(int local_port, const std::string& remote_addr, int remote_port);

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
