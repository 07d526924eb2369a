// Capacity accounting: how much cache memory a token and a sequence cost, and how the pools
// (K/V blocks, DeltaNet state slots, prefix-cache state snapshots) are sized -- in one
// function, size_pools, for every caller (the engine, serve's start-up, the tests and
// benchmarks).
//
// Paged (the default): admission needs both pools (a block for the next tokens and a slot
// for the sequence), so sizing gives state slots for max_num_seqs sequences first, but never
// more than half the budget; the rest becomes K/V blocks. The contiguous baseline
// (reserve_tokens > 0): every sequence is guaranteed reserve_tokens of K/V plus its state slot
// from admission on, so budget / (that) sequences fit, each never preempted. Or explicit
// counts, with no budget. A budget too small for one slot and one block (one reserved
// sequence) is a clear error, not a pool of zero. With speculative decoding a running
// sequence may hold more than one state slot (states_per_seq: its own, and one per drafted
// token for the state after each verified row), and the slot counts scale with it.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/dtype.h"
#include "kvcache/kv_layout.h"
#include "kvcache/state_pool.h"

namespace ds::kvcache {

// What one model's caches look like.
struct CacheGeometry {
  int64_t n_attention_layers = 0;  // full-attention layers (each has a K and a V pool)
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  DType k_dtype = DType::f32;
  DType v_dtype = DType::f32;
  StateLayout state;

  // K and V bytes of one token over all full-attention layers.
  int64_t kv_bytes_per_token() const;
  int64_t kv_bytes_per_block(int64_t block_size) const { return kv_bytes_per_token() * block_size; }
  int64_t state_bytes_per_slot() const { return state.bytes_per_slot(); }

  // The K or V pool layout of one layer for a pool of num_blocks blocks.
  KvPoolLayout k_layout(int64_t num_blocks, int64_t block_size) const;
  KvPoolLayout v_layout(int64_t num_blocks, int64_t block_size) const;
};

struct PoolSizes {
  int32_t num_blocks = 0;
  int32_t num_slots = 0;      // state slots of running sequences
  int32_t num_snapshots = 0;  // state slots of prefix-cache snapshots (after the others)
  int32_t block_size = 0;
  int64_t kv_bytes = 0;        // all K/V pools together
  int64_t state_bytes = 0;     // all running sequences' state slots together
  int64_t snapshot_bytes = 0;  // all snapshot slots together
  int64_t token_capacity() const { return static_cast<int64_t>(num_blocks) * block_size; }
  std::string describe() const;  // one line for start-up logs
};

// What the pools must hold.
struct PoolRequest {
  int32_t block_size = 16;
  int32_t max_num_seqs = 1;    // sequences that may run at once (each holds a state slot)
  int32_t states_per_seq = 1;  // state slots a running sequence may hold (1 + drafted tokens)
  int64_t budget_bytes = 0;    // memory for K/V blocks and state slots; 0: the counts below
  int64_t reserve_tokens = 0;  // with a budget, > 0: the contiguous baseline (see above)
  int32_t num_blocks = 0;      // without a budget: this many blocks
  int32_t num_slots = 0;       // without a budget: this many slots (0 = max_num_seqs * states_per_seq)
  // Prefix-cache state snapshots, in slots of their own: with a budget, snapshot_bytes of it
  // (whole slots, taken first); without one, num_snapshots slots.
  int64_t snapshot_bytes = 0;
  int32_t num_snapshots = 0;
};

// The pools for `request`. Throws std::invalid_argument when not even one slot and one block
// (one reserved sequence) fit, or the request is malformed.
PoolSizes size_pools(const CacheGeometry& geometry, const PoolRequest& request);

}  // namespace ds::kvcache
