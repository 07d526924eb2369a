#include "server/request_thread_pool.h"

#include <algorithm>

namespace ds::server {

RequestThreadPool::RequestThreadPool(size_t max_threads) : max_threads_(std::max<size_t>(1, max_threads)) {}

RequestThreadPool::~RequestThreadPool() { shutdown(); }

void RequestThreadPool::enqueue(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  if (stopping_) return;
  jobs_.push_back(std::move(fn));
  if (idle_ < jobs_.size() && threads_.size() < max_threads_) threads_.emplace_back([this] { work(); });
  cv_.notify_one();
}

void RequestThreadPool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads)
    if (t.joinable()) t.join();
}

size_t RequestThreadPool::threads() const {
  std::lock_guard lock(mu_);
  return threads_.size();
}

void RequestThreadPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty()) return;  // stopping with nothing left
    auto fn = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    fn();
    lock.lock();
  }
}

}  // namespace ds::server
