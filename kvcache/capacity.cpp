#include "kvcache/capacity.h"

#include <algorithm>
#include <limits>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace ds::kvcache {

int64_t CacheGeometry::kv_bytes_per_token() const {
  return n_attention_layers * n_kv_heads *
         (ds::row_bytes(k_dtype, head_dim) + ds::row_bytes(v_dtype, head_dim));
}

KvPoolLayout CacheGeometry::k_layout(int64_t num_blocks, int64_t block_size) const {
  return KvPoolLayout{num_blocks, block_size, n_kv_heads, head_dim, k_dtype};
}

KvPoolLayout CacheGeometry::v_layout(int64_t num_blocks, int64_t block_size) const {
  return KvPoolLayout{num_blocks, block_size, n_kv_heads, head_dim, v_dtype};
}

std::string PoolSizes::describe() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%d K/V blocks of %d tokens (%lld tokens, %.1f MiB), %d state slots (%.1f MiB), "
                "%d snapshot slots (%.1f MiB)",
                num_blocks, block_size, static_cast<long long>(token_capacity()),
                kv_bytes / 1048576.0, num_slots, state_bytes / 1048576.0, num_snapshots,
                snapshot_bytes / 1048576.0);
  return buf;
}

PoolSizes size_pools(const CacheGeometry& g, const PoolRequest& r) {
  auto bad = [](const std::string& m) { throw std::invalid_argument("size_pools: " + m); };
  if (r.block_size <= 0) bad("block_size must be positive");
  if (r.max_num_seqs <= 0) bad("max_num_seqs must be positive");
  if (r.states_per_seq <= 0) bad("states_per_seq must be positive");
  if (r.budget_bytes < 0 || r.reserve_tokens < 0 || r.num_blocks < 0 || r.num_slots < 0 || r.snapshot_bytes < 0 ||
      r.num_snapshots < 0)
    bad("negative size");

  const int64_t block_bytes = g.kv_bytes_per_block(r.block_size);
  const int64_t slot_bytes = g.state_bytes_per_slot();
  PoolSizes s;
  s.block_size = r.block_size;
  int64_t budget = r.budget_bytes;
  // Prefix-cache snapshots first: whole slots of the bytes asked for (with a budget), or the
  // count asked for.
  if (budget > 0 && r.snapshot_bytes > 0 && slot_bytes > 0) {
    if (r.snapshot_bytes >= budget)
      bad("the snapshot memory (" + std::to_string(r.snapshot_bytes) + " bytes) leaves nothing of the cache budget of " +
          std::to_string(budget) + " bytes");
    s.num_snapshots = static_cast<int32_t>(std::min<int64_t>(r.snapshot_bytes / slot_bytes, 1 << 20));
    budget -= int64_t{s.num_snapshots} * slot_bytes;
  } else if (budget == 0) {
    s.num_snapshots = r.num_snapshots;
  }
  s.snapshot_bytes = int64_t{s.num_snapshots} * slot_bytes;

  int64_t slots = 0, blocks = 0;
  if (budget == 0) {
    // Explicit counts.
    if (r.num_blocks < 1) bad("give a cache budget, or num_blocks >= 1");
    blocks = r.num_blocks;
    slots = r.num_slots > 0 ? r.num_slots : int64_t{r.max_num_seqs} * r.states_per_seq;
  } else if (r.reserve_tokens > 0) {
    // The contiguous baseline: each sequence owns reserve_tokens of K/V from admission on.
    const int64_t blocks_per_seq = (r.reserve_tokens + r.block_size - 1) / r.block_size;
    const int64_t seq_bytes = blocks_per_seq * block_bytes + slot_bytes * r.states_per_seq;
    const int64_t seqs = std::min<int64_t>(r.max_num_seqs, budget / seq_bytes);
    if (seqs < 1)
      bad("a cache budget of " + std::to_string(budget) + " bytes cannot hold one contiguous sequence of " +
          std::to_string(r.reserve_tokens) + " tokens (" + std::to_string(seq_bytes) + " bytes)");
    blocks = seqs * blocks_per_seq;
    slots = seqs * r.states_per_seq;
  } else {
    // State slots first (at most half the budget), then blocks. A model with no DeltaNet
    // layers still needs a slot per sequence, but it costs nothing.
    slots = int64_t{r.max_num_seqs} * r.states_per_seq;
    if (slot_bytes > 0) slots = std::min<int64_t>(slots, (budget / 2) / slot_bytes);
    if (slots < 1)
      bad("a cache budget of " + std::to_string(budget) + " bytes cannot hold one DeltaNet state slot of " +
          std::to_string(slot_bytes) + " bytes (it may use at most half the budget)");
    const int64_t left = budget - slots * slot_bytes;
    blocks = block_bytes > 0 ? left / block_bytes : std::numeric_limits<int32_t>::max();
    if (blocks < 1)
      bad("after " + std::to_string(slots) + " state slots the cache budget cannot hold one K/V block of " +
          std::to_string(block_bytes) + " bytes");
  }
  blocks = std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max());
  s.num_slots = static_cast<int32_t>(slots);
  s.num_blocks = static_cast<int32_t>(blocks);
  s.state_bytes = slots * slot_bytes;
  s.kv_bytes = blocks * block_bytes;
  return s;
}

}  // namespace ds::kvcache
