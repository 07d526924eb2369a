#include "scheduler/encoder_cache.h"

namespace ds::scheduler {

kernels::Tensor EncoderCache::find(const std::string& hash) {
  const auto it = index_.find(hash);
  if (it == index_.end()) {
    ++stats_.misses_total;
    return {};
  }
  ++stats_.hits_total;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->embeddings;
}

void EncoderCache::insert(const std::string& hash, const kernels::Tensor& embeddings) {
  const int64_t bytes = embeddings.bytes();
  if (index_.count(hash) || bytes > stats_.capacity_bytes) return;
  while (!lru_.empty() && stats_.bytes + bytes > stats_.capacity_bytes) {
    stats_.bytes -= lru_.back().embeddings.bytes();
    index_.erase(lru_.back().hash);
    lru_.pop_back();
    ++stats_.evictions_total;
  }
  lru_.push_front({hash, embeddings});
  index_.emplace(hash, lru_.begin());
  stats_.bytes += bytes;
  stats_.entries = static_cast<int32_t>(lru_.size());
}

}  // namespace ds::scheduler
