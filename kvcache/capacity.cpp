#include "kvcache/capacity.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <cstdio>

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

PoolSizes size_pools(const CacheGeometry& g, int64_t budget_bytes, int32_t block_size,
                     int32_t max_num_seqs, int64_t snapshot_bytes) {
  if (block_size <= 0) throw std::invalid_argument("size_pools: block_size must be positive");
  if (max_num_seqs <= 0) throw std::invalid_argument("size_pools: max_num_seqs must be positive");
  if (budget_bytes <= 0) throw std::invalid_argument("size_pools: the cache budget is empty");

  const int64_t block_bytes = g.kv_bytes_per_block(block_size);
  const int64_t slot_bytes = g.state_bytes_per_slot();
  PoolSizes s;
  s.block_size = block_size;
  if (snapshot_bytes > 0 && slot_bytes > 0) {
    if (snapshot_bytes >= budget_bytes)
      throw std::invalid_argument("size_pools: the snapshot memory (" + std::to_string(snapshot_bytes) +
                                  " bytes) leaves nothing of the cache budget of " + std::to_string(budget_bytes) +
                                  " bytes");
    s.num_snapshots = static_cast<int32_t>(std::min<int64_t>(snapshot_bytes / slot_bytes, 1 << 20));
    s.snapshot_bytes = s.num_snapshots * slot_bytes;
    budget_bytes -= s.snapshot_bytes;
  }

  // State slots first (at most half the budget), then blocks. A model with no DeltaNet
  // layers still needs a slot per sequence, but it costs nothing.
  int64_t slots = max_num_seqs;
  if (slot_bytes > 0) slots = std::min<int64_t>(slots, (budget_bytes / 2) / slot_bytes);
  if (slots < 1) {
    throw std::invalid_argument(
        "size_pools: a cache budget of " + std::to_string(budget_bytes) +
        " bytes cannot hold one DeltaNet state slot of " + std::to_string(slot_bytes) +
        " bytes (it may use at most half the budget)");
  }
  const int64_t left = budget_bytes - slots * slot_bytes;
  int64_t blocks = block_bytes > 0 ? left / block_bytes : std::numeric_limits<int32_t>::max();
  blocks = std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max());
  if (blocks < 1) {
    throw std::invalid_argument("size_pools: after " + std::to_string(slots) +
                                " state slots the cache budget cannot hold one K/V block of " +
                                std::to_string(block_bytes) + " bytes");
  }
  s.num_slots = static_cast<int32_t>(slots);
  s.num_blocks = static_cast<int32_t>(blocks);
  s.state_bytes = slots * slot_bytes;
  s.kv_bytes = blocks * block_bytes;
  return s;
}

}  // namespace ds::kvcache
