// ConnectionThreadPool: the task queue cpp-httplib runs connections on, grown on demand.
//
// httplib serves each connection on one pool thread for as long as the connection lives,
// and a streaming or waiting request holds its thread until the reply ends. Its default pool
// (max(8, cores - 1) threads, fixed) would make the ninth concurrent request wait for a
// thread before the engine even sees it, and a queue-full 429 could not be answered. This
// pool starts a new thread whenever a connection arrives and none is idle, up to
// max_threads (sized by the server from max-num-seqs + max-queue), so every admissible
// request and every refusal is served at once; beyond the cap connections wait in order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace ds::server {

class ConnectionThreadPool final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreadPool(size_t max_threads);
  ~ConnectionThreadPool() override;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;  // runs what is queued, then joins every thread

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
