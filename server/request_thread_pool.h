// RequestThreadPool: the threads requests are handled on, grown on demand.
//
// A generation request holds its thread until its reply ends (the handler waits on the
// engine's events), so a fixed pool of a few threads would make the next request wait for a
// thread before the engine even sees it, and a queue-full 429 could not be answered at once.
// This pool starts a thread whenever a request arrives and none is idle, up to max_threads
// (sized by the server from max-num-seqs + max-queue); beyond the cap requests wait in order.
// Reading requests costs no thread at all (http_transport.h reads them on its event loop).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ds::server {

class RequestThreadPool {
 public:
  explicit RequestThreadPool(size_t max_threads);
  ~RequestThreadPool();
  RequestThreadPool(const RequestThreadPool&) = delete;
  RequestThreadPool& operator=(const RequestThreadPool&) = delete;

  void enqueue(std::function<void()> fn);
  void shutdown();  // runs what is queued, then joins every thread

  size_t threads() const;

 private:
  void work();

  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace ds::server
