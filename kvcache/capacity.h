// Capacity accounting: how much cache memory a token and a sequence cost, and how a memory
// budget is split between K/V blocks, DeltaNet state slots and prefix-cache state snapshots.
//
// Admission needs both pools (a block for the next tokens and a slot for the sequence), so
// sizing gives state slots for max_num_seqs sequences first, but never more than half the
// budget; the rest becomes K/V blocks. A budget too small for one slot and one block is a
// clear error, not a pool of zero.
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

// Splits budget_bytes between prefix-cache snapshots (snapshot_bytes of it, whole slots),
// state slots (up to max_num_seqs) and K/V blocks. Throws std::invalid_argument when not even
// one slot and one block fit.
PoolSizes size_pools(const CacheGeometry& geometry, int64_t budget_bytes, int32_t block_size,
                     int32_t max_num_seqs, int64_t snapshot_bytes = 0);

}  // namespace ds::kvcache
