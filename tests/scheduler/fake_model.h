// FakeModel: a stand-in for the real model that is fast and checks the engine's side of the
// forward contract on every call.
//
// Its "K/V cache" stores the token id written at each pool position, and each state slot (and
// prefix-cache snapshot slot, copied by copy_state) a
// running hash of the tokens fed through it since it was zeroed. A forward step checks, for
// every chunk, that the slot has consumed exactly n_cached tokens and that the tokens read
// back through the chunk's block table hash to the slot's state: a wrong table, a slot not
// zeroed on (re)admission, a skipped or repeated token, or K/V overwritten by another
// sequence all break that equality (counted in violations(), and thrown). A verify chunk's
// row-state slots get the hash after each of its rows, so a sequence that continues from one
// of them after a partial acceptance is checked the same way. The logits of a
// position are a pseudo-random function of the whole token history up to it, so the
// expected output of any request can be computed independently (reference_tokens) and a
// sequence recomputed after preemption must reproduce it exactly.
//
// Host tier: a host block holds the token ids of a pool block, a host state slot a slot's
// hash and count. Offloads copy at once (the device's order, perfectly kept); a load's copies
// land only when its ticket is seen done -- after load_delay polls of transfer_done -- or when
// wait_transfer / order_after ask for it (as the device would have finished them by then), and
// read the host slots at that moment: a sequence run before its load landed, a block or slot
// reused under an abandoned load, or a host slot rewritten under a load all break the
// equality above.
//
// Fault injection: a chunk containing reject_token makes forward throw std::invalid_argument
// before touching anything (a batch the model refuses); one containing crash_token throws
// std::runtime_error after the state of earlier chunks was advanced (a failure mid-step);
// nan_token as the last token of a logits row makes that row NaN.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/sampler.h"
#include "scheduler/sampling_params.h"
#include "scheduler/forward_model.h"

namespace ds::test {

class FakeModel final : public scheduler::ForwardModel {
 public:
  explicit FakeModel(int64_t vocab = 64, std::vector<int32_t> eos = {});

  int64_t vocab_size() const override { return vocab_; }
  std::vector<int32_t> eos_token_ids() const override { return eos_; }
  kvcache::CacheGeometry cache_geometry() const override;
  void allocate_cache(const kvcache::PoolSizes& sizes) override;
  kvcache::StatePool::ZeroFn state_zero_fn() override;
  void copy_state(kvcache::SlotId from, kvcache::SlotId to) override;
  const kernels::Tensor& forward(const qwen35::ForwardBatch& batch) override;
  HostTier allocate_host_cache(int64_t bytes) override;
  uint64_t transfer_host(std::span<const kvcache::BlockTransfer> blocks, std::span<const kvcache::StateTransfer> states,
                         bool to_host) override;
  bool transfer_done(uint64_t ticket) override;
  void read_host_entry(kvcache::DiskEntryKind kind, int32_t host_id, std::span<uint8_t> out) override;
  void write_host_entry(kvcache::DiskEntryKind kind, int32_t host_id, std::span<const uint8_t> in) override;
  void wait_transfer(uint64_t ticket) override { land_loads(ticket); }
  void order_after(uint64_t ticket) override {
    if (!(ticket & 1)) ++fenced_loads_;  // a load's ticket: an abandoned load (offloads are odd)
    land_loads(ticket);
  }

  int32_t load_delay = 0;  // polls of transfer_done before a load lands
  int64_t loads_landed() const { return loads_landed_; }
  int64_t fenced_loads() const { return fenced_loads_; }

  // The logits row after feeding `history` (what forward returns for its last position).
  std::vector<float> logits_after(const std::vector<int32_t>& history) const;
  // What a request produces: sampled with the CPU sampler from logits_after, stopping at
  // stop ids (already merged with eos as the engine would), max_tokens or max_ctx.
  std::vector<int32_t> reference_tokens(const std::vector<int32_t>& prompt, int64_t max_tokens,
                                        const std::vector<int32_t>& stop_ids, int64_t max_ctx,
                                        const scheduler::SamplingParams& params, uint64_t seed) const;

  // Runs at the start of every forward, on the engine thread: a test that must have every
  // request queued before the second step holds the first one here.
  std::function<void()> on_forward;

  int32_t reject_token = -1;
  int32_t crash_token = -1;
  int32_t nan_token = -1;

  int64_t violations() const { return violations_; }
  const std::string& first_violation() const { return first_violation_; }
  int64_t forward_calls() const { return forward_calls_; }
  int64_t zero_calls() const { return zero_calls_; }
  int64_t copy_calls() const { return copy_calls_; }
  // Chunks that named a snapshot row (prefix caching's state inside a prefill chunk).
  int64_t snapshot_rows() const { return snapshot_rows_; }
  int64_t max_batch_seqs() const { return max_batch_seqs_; }
  int64_t max_batch_tokens() const { return max_batch_tokens_; }

 private:
  void violation(const std::string& what);
  // Lands the pending loads up to `ticket` (in order).
  void land_loads(uint64_t ticket);
  struct PendingLoad {
    uint64_t ticket = 0;
    int32_t polls = 0;
    std::vector<kvcache::BlockTransfer> blocks;
    std::vector<kvcache::StateTransfer> states;
  };
  std::vector<PendingLoad> pending_loads_;
  std::vector<int32_t> host_kv_;
  std::vector<uint64_t> host_hash_;
  std::vector<int64_t> host_count_;
  int32_t host_blocks_ = 0, host_slots_ = 0;
  uint64_t offload_tickets_ = 0, load_tickets_ = 0;
  std::atomic<int64_t> loads_landed_{0}, fenced_loads_{0};  // read by the test thread

  int64_t vocab_;
  std::vector<int32_t> eos_;
  int32_t num_blocks_ = 0, block_size_ = 0, num_slots_ = 0;
  std::vector<int32_t> kv_;          // token id at each pool position, -1 = never written
  std::vector<uint64_t> slot_hash_;  // hash of the tokens a slot has consumed
  std::vector<int64_t> slot_count_;  // how many
  std::vector<float> logits_;
  kernels::Tensor logits_tensor_;
  int64_t violations_ = 0;
  std::string first_violation_;
  int64_t forward_calls_ = 0, zero_calls_ = 0, copy_calls_ = 0, max_batch_seqs_ = 0, max_batch_tokens_ = 0;
  int64_t snapshot_rows_ = 0;
};

}  // namespace ds::test
