// ThreadPool: a few worker threads that split a loop with the calling thread.
//
// parallel_for(n, grain, fn) hands out [begin, end) ranges of at most `grain` items from an
// atomic counter, so uneven items (attention rows of different lengths) balance themselves;
// the caller works too and returns when every range is done. Loops of at most `grain` items,
// a pool of one thread, or a call from inside a running loop run inline. Workers sleep on a
// condition variable between loops instead of spinning: the dev and CI machines have two
// cores shared with other processes. For the same reason the caller never waits for a worker
// that has not woken up yet: once the caller has taken the last range it closes the loop, and
// only workers that joined before that are waited for (a late one goes back to sleep).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ds::kernels::cpu {

class ThreadPool {
 public:
  // num_threads counts the caller; 0 = hardware concurrency.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (workers_.empty() || n <= grain || inside_loop_) {
      fn(int64_t{0}, n);
      return;
    }
    run(n, grain, std::function<void(int64_t, int64_t)>(std::ref(fn)));
  }

 private:
  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  void work_on_current();
  void worker_loop();

  static thread_local bool inside_loop_;

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  bool open_ = false;   // workers may still join the current loop
  int active_ = 0;      // workers inside the current loop
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  std::atomic<int64_t> next_{0};
  std::vector<std::thread> workers_;
};

}  // namespace ds::kernels::cpu
