// ScriptedModel: a stand-in ForwardModel that "writes" a fixed token script, so the HTTP
// tests can drive the server to replies a random-weight model would never produce (a
// reasoning block, XML tool calls) and can slow down or fail steps on purpose.
//
// For every sampling row it finds the longest tail of the sequence's tokens (prompt and
// reply so far, tracked per state slot) that is a prefix of the script and answers the next
// script token; once the whole script is there it answers eos (and, if eos is ignored, starts
// again). Tracking by slot makes it correct under chunked prefill and preemption: a slot is
// zeroed when a sequence is (re)admitted and every token it holds is fed through forward.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "scheduler/forward_model.h"

namespace ds::test {

class ScriptedModel final : public scheduler::ForwardModel {
 public:
  ScriptedModel(int64_t vocab, std::vector<int32_t> eos, std::vector<int32_t> script)
      : vocab_(vocab), eos_(std::move(eos)), script_(std::move(script)) {}

  void set_step_delay(std::chrono::milliseconds d) { delay_ms_ = static_cast<int>(d.count()); }
  void set_fail(bool fail) { fail_ = fail; }
  int64_t steps() const { return steps_.load(); }

  int64_t vocab_size() const override { return vocab_; }
  std::vector<int32_t> eos_token_ids() const override { return eos_; }
  kvcache::CacheGeometry cache_geometry() const override {
    kvcache::CacheGeometry g;
    g.n_attention_layers = 1;
    g.n_kv_heads = 1;
    g.head_dim = 1;
    return g;  // 8 bytes of K/V per token, no DeltaNet state
  }
  void allocate_cache(const kvcache::PoolSizes& s) override {
    std::lock_guard lock(mu_);
    history_.assign(static_cast<size_t>(s.num_slots) + static_cast<size_t>(s.num_snapshots), {});
  }
  void copy_state(kvcache::SlotId from, kvcache::SlotId to) override {
    std::lock_guard lock(mu_);
    history_.at(static_cast<size_t>(to)) = history_.at(static_cast<size_t>(from));
  }
  kvcache::StatePool::ZeroFn state_zero_fn() override {
    return [this](kvcache::SlotId slot) {
      std::lock_guard lock(mu_);
      history_.at(static_cast<size_t>(slot)).clear();
    };
  }
  const kernels::Tensor& forward(const qwen35::ForwardBatch& batch) override {
    ++steps_;
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
    if (fail_) throw std::runtime_error("scripted failure");
    std::lock_guard lock(mu_);
    const int64_t rows = batch.num_logit_rows();
    // Off-script tokens at -1e4: exp(-1e4) is 0 in f32, so a sampled request (temperature 1)
    // follows the script too. At -10 / +10 each token left it with p ~ vocab * e^-20 (2e-6):
    // a clean-clone CI run once drew an off-script token mid-call and the script restarted
    // inside a tool call's parameter tag.
    storage_.assign(static_cast<size_t>(std::max<int64_t>(rows, 1) * vocab_), -1e4f);
    int64_t row = 0;
    for (const auto& c : batch.seqs) {
      auto& h = history_.at(static_cast<size_t>(c.state_slot));
      for (int32_t t : c.tokens) h.push_back(t);
      for (int32_t r = 0; r < c.logit_rows; ++r, ++row) {
        const size_t upto = h.size() - static_cast<size_t>(c.logit_rows - 1 - r);
        storage_[static_cast<size_t>(row * vocab_ + next_token(h, upto))] = 10.0f;
      }
    }
    logits_ = kernels::Tensor(std::shared_ptr<void>(storage_.data(), [](void*) {}), storage_.data(), DType::f32,
                              kernels::Shape{rows, vocab_});
    return logits_;
  }

 private:
  int32_t next_token(const std::vector<int32_t>& h, size_t n) const {
    auto ends_with = [&](size_t len) {
      if (len > n) return false;
      for (size_t k = 0; k < len; ++k)
        if (h[n - len + k] != script_[k]) return false;
      return true;
    };
    if (ends_with(script_.size())) return eos_.empty() ? script_[0] : eos_[0];
    for (size_t len = std::min(script_.size() - 1, n); len > 0; --len)
      if (ends_with(len)) return script_[len];
    return script_[0];
  }

  int64_t vocab_;
  std::vector<int32_t> eos_, script_;
  std::mutex mu_;
  std::vector<std::vector<int32_t>> history_;
  std::vector<float> storage_;
  kernels::Tensor logits_;
  std::atomic<int> delay_ms_{0};
  std::atomic<bool> fail_{false};
  std::atomic<int64_t> steps_{0};
};

}  // namespace ds::test
