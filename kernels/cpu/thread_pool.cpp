#include "kernels/cpu/thread_pool.h"

namespace ds::kernels::cpu {

thread_local bool ThreadPool::inside_loop_ = false;

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (num_threads <= 0) num_threads = 1;
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::work_on_current() {
  inside_loop_ = true;
  for (;;) {
    const int64_t begin = next_.fetch_add(grain_, std::memory_order_relaxed);
    if (begin >= n_) break;
    (*job_)(begin, std::min(n_, begin + grain_));
  }
  inside_loop_ = false;
}

void ThreadPool::run(int64_t n, int64_t grain,
                     const std::function<void(int64_t, int64_t)>& fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    n_ = n;
    grain_ = grain;
    next_.store(0, std::memory_order_relaxed);
    open_ = true;
    active_ = 0;
    ++generation_;
  }
  work_cv_.notify_all();
  work_on_current();
  std::unique_lock<std::mutex> lock(mu_);
  open_ = false;
  done_cv_.wait(lock, [this] { return active_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || (open_ && generation_ != seen); });
      if (stop_) return;
      seen = generation_;
      ++active_;
    }
    work_on_current();
    std::lock_guard<std::mutex> lock(mu_);
    if (--active_ == 0) done_cv_.notify_one();
  }
}

}  // namespace ds::kernels::cpu
