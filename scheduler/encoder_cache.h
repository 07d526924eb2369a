// EncoderCache: images' encoder outputs (the vision tower's embeddings) by image content hash,
// so a repeated image (the next turn of a conversation, n > 1 choices, the same screenshot
// sent again) is encoded once. LRU within a byte budget; an entry larger than the budget is
// not kept. Eviction only drops the cache's reference: a sequence still feeding an image's
// rows keeps its own. Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>

#include "kernels/tensor.h"

namespace ds::scheduler {

struct EncoderCacheStats {
  int64_t hits_total = 0;
  int64_t misses_total = 0;
  int64_t evictions_total = 0;
  int64_t bytes = 0;
  int64_t capacity_bytes = 0;
  int32_t entries = 0;
};

class EncoderCache {
 public:
  explicit EncoderCache(int64_t capacity_bytes) { stats_.capacity_bytes = capacity_bytes; }

  // The embeddings of `hash`, now most recently used; empty when absent (a miss).
  kernels::Tensor find(const std::string& hash);
  // Keeps `embeddings` under `hash` (replacing nothing: a hash present is left as it is),
  // evicting the least recently used entries past the budget.
  void insert(const std::string& hash, const kernels::Tensor& embeddings);
  const EncoderCacheStats& stats() const { return stats_; }

 private:
  struct Entry {
    std::string hash;
    kernels::Tensor embeddings;
  };
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  EncoderCacheStats stats_;
};

}  // namespace ds::scheduler
