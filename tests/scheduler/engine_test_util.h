// Helpers shared by the engine tests: waiting on streams with a deadline (a hang is a
// failure, not a stuck CI job), and a model wrapper that can hold the engine inside forward.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/sampler.h"
#include "scheduler/engine.h"
#include "scheduler/forwarding_model.h"

namespace ds::test {

// The engine configuration of the FakeModel tests: small pools, any context, invariant checks
// after every step.
inline scheduler::EngineConfig fake_engine_config(int32_t blocks, int32_t block_size, int32_t max_seqs,
                                                  int64_t budget) {
  scheduler::EngineConfig c;
  c.scheduler.max_num_seqs = max_seqs;
  c.scheduler.max_num_batched_tokens = budget;
  c.block_size = block_size;
  c.num_blocks = blocks;
  c.max_ctx = 1 << 20;
  c.max_queue = 10000;
  c.check_invariants = true;
  return c;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<scheduler::RequestEvent> events;
  std::optional<scheduler::FinishReason> finish;
  int finals = 0;  // final events seen (must be exactly 1)
  scheduler::RequestEvent last;
};

// Reads a handle to its final event; throws when nothing arrives within `timeout`.
inline Outcome collect(scheduler::RequestHandle& h, std::chrono::seconds timeout = std::chrono::seconds(300)) {
  Outcome o;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds(0) || !h.wait_for(left))
      throw std::runtime_error("request " + std::to_string(h.id()) + " produced no final event in time");
    auto e = h.try_next();
    if (!e) {
      if (o.finals > 0) break;
      continue;
    }
    if (e->token >= 0) o.tokens.push_back(e->token);
    if (e->is_final()) {
      ++o.finals;
      o.finish = e->finish;
      o.last = *e;
    }
    o.events.push_back(std::move(*e));
    if (o.finals > 0) {
      // Nothing may follow the final event.
      if (h.try_next()) ++o.finals;
      break;
    }
  }
  return o;
}

// Delegates to another model; while closed, forward() waits for open() (so a test can hold
// the engine thread mid-step and fill the queue behind it).
class GatedModel final : public scheduler::ForwardingModel {
 public:
  using ForwardingModel::ForwardingModel;
  const kernels::Tensor& forward(const qwen35::ForwardBatch& b) override {
    std::unique_lock lock(mu_);
    ++entered_;
    if (hold_at_ > 0 && entered_ >= hold_at_) open_ = false;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    lock.unlock();
    return inner_.forward(b);
  }
  void close() {
    std::lock_guard lock(mu_);
    open_ = false;
  }
  // Closes the gate by itself when forward is entered for the n-th time (counting from the
  // start), so a test can stop the engine at a precise step.
  void hold_at(int n) {
    std::lock_guard lock(mu_);
    hold_at_ = n;
  }
  void open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
      hold_at_ = 0;
    }
    cv_.notify_all();
  }
  int entered() {
    std::lock_guard lock(mu_);
    return entered_;
  }
  // Waits until forward has been entered `n` times in all.
  bool wait_entered(int n, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return entered_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int entered_ = 0;
  int hold_at_ = 0;
};

// Polls stats() until pred holds (the engine publishes after each iteration).
template <class Pred>
bool wait_stats(const scheduler::Engine& e, Pred pred, std::chrono::seconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred(e.stats())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred(e.stats());
}

}  // namespace ds::test
