#include "model/qwen35/refcheck_pools.h"

#include <algorithm>
#include <stdexcept>

namespace ds::qwen35 {

kvcache::PoolSizes RefcheckPools::sizes(int64_t longest, int32_t block_size) {
  if (block_size <= 0) throw std::invalid_argument("refcheck: block size must be positive");
  // Two sequences of the longest length, plus spare blocks so the shuffle has a choice.
  const int32_t per_seq = static_cast<int32_t>((longest + block_size - 1) / block_size);
  kvcache::PoolSizes s;
  s.num_blocks = 2 * per_seq + 5;
  s.num_slots = 3;
  s.block_size = block_size;
  return s;
}

RefcheckPools::RefcheckPools(const kvcache::PoolSizes& sizes, Model& model, std::mt19937_64& rng)
    : blocks_(sizes.num_blocks, sizes.block_size),
      slots_(sizes.num_slots, model.cache_geometry().state, model.state_zero_fn()) {
  for (int32_t b = 0; b < sizes.num_blocks; ++b) free_blocks_.push_back(std::move(*blocks_.reserve(1)));
  std::shuffle(free_blocks_.begin(), free_blocks_.end(), rng);
  const auto decoy = slots_.acquire();
  const auto a = slots_.acquire(), b = slots_.acquire();
  if (!decoy || !a || !b) throw std::logic_error("refcheck: out of state slots");
  decoy_ = *decoy;
  slot_a_ = *a;
  slot_b_ = *b;
}

void RefcheckPools::grow(kvcache::BlockTable& table, int64_t n_new) {
  for (int32_t k = table.blocks_needed(n_new); k > 0; --k) {
    if (free_blocks_.empty()) throw std::logic_error("refcheck: out of K/V blocks");
    blocks_.commit(free_blocks_.back(), table);
    free_blocks_.pop_back();
  }
}

}  // namespace ds::qwen35
