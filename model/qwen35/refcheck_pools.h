// RefcheckPools: the paging under a reference check (refcheck.h, vision_refcheck.h), kept in
// one place so the text and the vision check size their cache alike and page through the same
// paths. Each check runs two sequences of up to `longest` tokens side by side; the cache holds
// blocks for both plus spare ones, and three state slots (a decoy, so neither sequence sits in
// slot 0, then A and B).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kvcache/block_pool.h"
#include "kvcache/capacity.h"
#include "kvcache/state_pool.h"
#include "model/qwen35/model.h"

namespace ds::qwen35 {

class RefcheckPools {
 public:
  // The cache to allocate (Model::allocate_cache) for sequences of up to `longest` tokens.
  static kvcache::PoolSizes sizes(int64_t longest, int32_t block_size);

  // Fresh pools over the model's cache of `sizes`, for one prompt: every block reserved and
  // shuffled by `rng`, so a sequence's blocks are scattered rather than consecutive; the
  // decoy, A's and B's slots acquired (zeroed) in that order.
  RefcheckPools(const kvcache::PoolSizes& sizes, Model& model, std::mt19937_64& rng);

  // Commits blocks from the shuffled list so that `table` holds n_new more tokens.
  void grow(kvcache::BlockTable& table, int64_t n_new);
  kvcache::SlotId slot_a() const { return slot_a_.id; }
  kvcache::SlotId slot_b() const { return slot_b_.id; }

 private:
  kvcache::BlockPool blocks_;
  kvcache::StatePool slots_;
  std::vector<kvcache::Reservation> free_blocks_;
  kvcache::SlotHandle decoy_, slot_a_, slot_b_;
};

}  // namespace ds::qwen35
