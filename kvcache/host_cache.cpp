#include "kvcache/host_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ds::kvcache {

HostTierSizes HostTierSizes::from_budget(int64_t bytes, int64_t block_bytes, int64_t snapshot_bytes) {
  if (bytes <= 0 || block_bytes <= 0 || snapshot_bytes <= 0 || bytes < block_bytes + snapshot_bytes) return {};
  const int64_t snapshots = std::max<int64_t>(1, bytes / 8 / snapshot_bytes);
  const int64_t blocks = (bytes - snapshots * snapshot_bytes) / block_bytes;
  if (blocks < 1) return {};
  constexpr int64_t kMax = int64_t{1} << 30;  // ids are 32-bit
  return {static_cast<int32_t>(std::min(blocks, kMax)), static_cast<int32_t>(std::min(snapshots, kMax))};
}

HostCache::HostCache(int32_t num_blocks, int32_t num_snapshots, int32_t block_size)
    : block_size_(block_size), blocks_(static_cast<size_t>(std::max(0, num_blocks))),
      snapshots_(static_cast<size_t>(std::max(0, num_snapshots))) {
  if (num_blocks < 0 || num_snapshots < 0 || block_size <= 0)
    throw std::invalid_argument("HostCache: negative sizes or a block size below 1");
  // Handed out in increasing order, so that a fresh tier's stores are consecutive slots (a
  // device backend merges their copies).
  for (int32_t i = num_blocks - 1; i >= 0; --i) free_blocks_.push_back(i);
  for (int32_t i = num_snapshots - 1; i >= 0; --i) free_snapshots_.push_back(i);
  counts_.block_capacity = num_blocks;
  counts_.snapshot_capacity = num_snapshots;
}

HostBlockId HostCache::take_block() {
  if (free_blocks_.empty()) {
    if (block_lru_.empty()) return -1;  // every block pinned (or none at all)
    const HostBlockId victim = block_lru_.front();
    Block& b = blocks_[static_cast<size_t>(victim)];
    block_lru_.pop_front();
    if (auto it = block_by_key_.find(b.key); it != block_by_key_.end() && it->second == victim) block_by_key_.erase(it);
    b.used = false;
    b.tokens.clear();
    free_blocks_.push_back(victim);
    ++counts_.evicted_blocks_total;
  }
  const HostBlockId id = free_blocks_.back();
  free_blocks_.pop_back();
  return id;
}

HostSlotId HostCache::take_snapshot() {
  if (free_snapshots_.empty()) {
    if (snapshot_lru_.empty()) return -1;
    const HostSlotId victim = snapshot_lru_.front();
    Snapshot& s = snapshots_[static_cast<size_t>(victim)];
    snapshot_lru_.pop_front();
    if (auto it = snapshot_by_key_.find(s.key); it != snapshot_by_key_.end() && it->second == victim)
      snapshot_by_key_.erase(it);
    s.used = false;
    free_snapshots_.push_back(victim);
    ++counts_.evicted_snapshots_total;
  }
  const HostSlotId id = free_snapshots_.back();
  free_snapshots_.pop_back();
  return id;
}

std::optional<HostBlockId> HostCache::store_block(PrefixKey key, PrefixKey check, PrefixKey parent_key,
                                                  std::span<const int32_t> tokens) {
  if (static_cast<int32_t>(tokens.size()) != block_size_) return std::nullopt;
  if (auto it = block_by_key_.find(key); it != block_by_key_.end()) {
    Block& b = blocks_[static_cast<size_t>(it->second)];
    if (b.check == check && b.parent == parent_key && b.pins == 0 &&
        std::equal(tokens.begin(), tokens.end(), b.tokens.begin(), b.tokens.end()))
      block_lru_.splice(block_lru_.end(), block_lru_, b.lru);
    return std::nullopt;
  }
  const HostBlockId id = take_block();
  if (id < 0) return std::nullopt;
  Block& b = blocks_[static_cast<size_t>(id)];
  b.used = true;
  b.key = key;
  b.check = check;
  b.parent = parent_key;
  b.tokens.assign(tokens.begin(), tokens.end());
  b.pins = 0;
  b.lru = block_lru_.insert(block_lru_.end(), id);
  block_by_key_[key] = id;
  ++counts_.stored_blocks_total;
  return id;
}

std::optional<HostSlotId> HostCache::store_snapshot(PrefixKey key, PrefixKey check) {
  if (auto it = snapshot_by_key_.find(key); it != snapshot_by_key_.end()) {
    Snapshot& s = snapshots_[static_cast<size_t>(it->second)];
    if (s.check == check && s.pins == 0) snapshot_lru_.splice(snapshot_lru_.end(), snapshot_lru_, s.lru);
    return std::nullopt;
  }
  const HostSlotId id = take_snapshot();
  if (id < 0) return std::nullopt;
  Snapshot& s = snapshots_[static_cast<size_t>(id)];
  s.used = true;
  s.key = key;
  s.check = check;
  s.pins = 0;
  s.lru = snapshot_lru_.insert(snapshot_lru_.end(), id);
  snapshot_by_key_[key] = id;
  ++counts_.stored_snapshots_total;
  return id;
}

HostBlockId HostCache::find_block(PrefixKey key, PrefixKey check, PrefixKey parent_key,
                                  std::span<const int32_t> tokens) const {
  auto it = block_by_key_.find(key);
  if (it == block_by_key_.end()) return -1;
  const Block& b = blocks_[static_cast<size_t>(it->second)];
  if (b.check != check || b.parent != parent_key || !std::equal(tokens.begin(), tokens.end(), b.tokens.begin(), b.tokens.end()))
    return -1;
  return it->second;
}

HostSlotId HostCache::find_snapshot(PrefixKey key, PrefixKey check) const {
  auto it = snapshot_by_key_.find(key);
  if (it == snapshot_by_key_.end() || snapshots_[static_cast<size_t>(it->second)].check != check) return -1;
  return it->second;
}

HostCache::BlockInfo HostCache::block_info(HostBlockId id) const {
  const Block& b = blocks_.at(static_cast<size_t>(id));
  if (!b.used) throw std::logic_error("HostCache::block_info: block " + std::to_string(id) + " is free");
  return {b.key, b.check, b.parent, b.tokens};
}

std::pair<PrefixKey, PrefixKey> HostCache::snapshot_info(HostSlotId id) const {
  const Snapshot& s = snapshots_.at(static_cast<size_t>(id));
  if (!s.used) throw std::logic_error("HostCache::snapshot_info: snapshot " + std::to_string(id) + " is free");
  return {s.key, s.check};
}

void HostCache::pin(std::span<const HostBlockId> blocks, HostSlotId snapshot) {
  for (HostBlockId id : blocks) {
    Block& b = blocks_.at(static_cast<size_t>(id));
    if (!b.used) throw std::logic_error("HostCache::pin: block " + std::to_string(id) + " is free");
    if (b.pins++ == 0) block_lru_.erase(b.lru);
  }
  if (snapshot >= 0) {
    Snapshot& s = snapshots_.at(static_cast<size_t>(snapshot));
    if (!s.used) throw std::logic_error("HostCache::pin: snapshot " + std::to_string(snapshot) + " is free");
    if (s.pins++ == 0) snapshot_lru_.erase(s.lru);
  }
}

void HostCache::unpin(std::span<const HostBlockId> blocks, HostSlotId snapshot) {
  // Tail first, so that the chain's head is the most recently used.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    Block& b = blocks_.at(static_cast<size_t>(*it));
    if (b.pins <= 0) throw std::logic_error("HostCache::unpin: block " + std::to_string(*it) + " is not pinned");
    if (--b.pins == 0) b.lru = block_lru_.insert(block_lru_.end(), *it);
  }
  if (snapshot >= 0) {
    Snapshot& s = snapshots_.at(static_cast<size_t>(snapshot));
    if (s.pins <= 0) throw std::logic_error("HostCache::unpin: snapshot " + std::to_string(snapshot) + " is not pinned");
    if (--s.pins == 0) s.lru = snapshot_lru_.insert(snapshot_lru_.end(), snapshot);
  }
}

HostCacheStats HostCache::stats() const {
  HostCacheStats s = counts_;
  s.blocks = counts_.block_capacity - static_cast<int32_t>(free_blocks_.size());
  s.snapshots = counts_.snapshot_capacity - static_cast<int32_t>(free_snapshots_.size());
  s.pinned_blocks = s.blocks - static_cast<int32_t>(block_lru_.size());
  s.pinned_snapshots = s.snapshots - static_cast<int32_t>(snapshot_lru_.size());
  return s;
}

void HostCache::check_invariants() const {
  auto fail = [](const std::string& m) { throw std::logic_error("host cache invariant: " + m); };
  size_t used = 0, unpinned = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (!b.used) {
      if (b.pins != 0) fail("free block " + std::to_string(i) + " is pinned");
      continue;
    }
    ++used;
    if (b.pins < 0) fail("block " + std::to_string(i) + " has negative pins");
    if (b.pins == 0) ++unpinned;
    if (static_cast<int32_t>(b.tokens.size()) != block_size_) fail("block " + std::to_string(i) + " is not whole");
  }
  if (used + free_blocks_.size() != blocks_.size()) fail("blocks are neither used nor free");
  if (unpinned != block_lru_.size()) fail("the block LRU and the unpinned blocks differ");
  for (HostBlockId id : block_lru_)
    if (!blocks_[static_cast<size_t>(id)].used || blocks_[static_cast<size_t>(id)].pins != 0)
      fail("the block LRU lists a free or pinned block");
  for (const auto& [key, id] : block_by_key_)
    if (!blocks_[static_cast<size_t>(id)].used || blocks_[static_cast<size_t>(id)].key != key)
      fail("a key maps to a block not stored under it");
  used = unpinned = 0;
  for (const Snapshot& s : snapshots_) {
    if (!s.used) {
      if (s.pins != 0) fail("a free snapshot is pinned");
      continue;
    }
    ++used;
    if (s.pins == 0) ++unpinned;
  }
  if (used + free_snapshots_.size() != snapshots_.size()) fail("snapshots are neither used nor free");
  if (unpinned != snapshot_lru_.size()) fail("the snapshot LRU and the unpinned snapshots differ");
  for (const auto& [key, id] : snapshot_by_key_)
    if (!snapshots_[static_cast<size_t>(id)].used || snapshots_[static_cast<size_t>(id)].key != key)
      fail("a key maps to a snapshot not stored under it");
}

}  // namespace ds::kvcache
