#include "kvcache/prefix_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace ds::kvcache {

namespace {

std::span<const int32_t> block_tokens(std::span<const int32_t> tokens, size_t i, int32_t bs) {
  return tokens.subspan(i * static_cast<size_t>(bs), static_cast<size_t>(bs));
}

}  // namespace

PrefixCache::PrefixCache(BlockPool& blocks, SlotId first_snapshot_slot, int32_t num_snapshots, HostCache* host)
    : blocks_(blocks), block_size_(blocks.block_size()), first_snapshot_(first_snapshot_slot),
      entries_(static_cast<size_t>(blocks.num_blocks())), snapshots_(static_cast<size_t>(std::max(0, num_snapshots))),
      host_(host) {
  if (host_ && host_->block_size() != block_size_)
    throw std::invalid_argument("PrefixCache: the host tier's block size differs from the pool's");
  if (num_snapshots < 0) throw std::invalid_argument("PrefixCache: negative snapshot count");
  for (int32_t i = num_snapshots - 1; i >= 0; --i) free_snapshots_.push_back(first_snapshot_ + i);
}

PrefixCache::~PrefixCache() { clear(); }

const PrefixCache::Entry* PrefixCache::match(PrefixKey key, std::span<const int32_t> toks, BlockHandle parent,
                                             PrefixKey root) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return nullptr;
  const Entry& e = entries_[static_cast<size_t>(it->second)];
  if (!e.cached || !(e.parent == parent) || (!parent.valid() && e.root != root) || !std::equal(toks.begin(), toks.end(), e.tokens.begin(), e.tokens.end()))
    return nullptr;
  return &e;
}

PrefixHit PrefixCache::lookup(std::span<const int32_t> tokens, std::span<const PrefixKey> keys,
                              int64_t max_tokens, PrefixKey root) const {
  PrefixHit hit;
  const size_t n = std::min({keys.size(), tokens.size() / static_cast<size_t>(block_size_),
                             static_cast<size_t>(std::max<int64_t>(0, max_tokens) / block_size_)});
  std::vector<BlockHandle> chain;
  size_t with_snapshot = 0;
  BlockHandle parent;
  for (size_t i = 0; i < n; ++i) {
    const Entry* e = match(keys[i], block_tokens(tokens, i, block_size_), parent, root);
    if (!e) break;
    chain.push_back(e->self);
    parent = e->self;
    if (e->snapshot >= 0) {
      with_snapshot = chain.size();
      hit.snapshot = e->snapshot;
    }
  }
  const size_t on_device = chain.size();
  // The host tier continues the chain where the device's ends, and may hold a deeper snapshot
  // (also one the device evicted while keeping its blocks). A device snapshot wins a tie.
  size_t best = with_snapshot;
  std::vector<HostBlockId> host_chain;
  if (host_) {
    // Both host-tier hashes start from the chain's root, as the device chain does: a LoRA
    // adapter's host entries never answer another adapter's (or the base's) prompts.
    PrefixKey check = root;
    for (size_t i = 0; i < n; ++i) {
      const auto toks = block_tokens(tokens, i, block_size_);
      check = check_key(check, toks);
      if (i >= on_device) {
        const HostBlockId b = host_->find_block(keys[i], check, i > 0 ? keys[i - 1] : root, toks);
        if (b < 0) break;
        host_chain.push_back(b);
      }
      if (i + 1 > best) {
        const HostSlotId s = host_->find_snapshot(keys[i], check);
        if (s >= 0) {
          best = i + 1;
          hit.host_snapshot = s;
          hit.snapshot = -1;
        }
      }
    }
  }
  hit.matched_tokens = static_cast<int64_t>(on_device + host_chain.size()) * block_size_;
  chain.resize(std::min(best, on_device));
  hit.blocks = std::move(chain);
  if (best > on_device) host_chain.resize(best - on_device);
  else host_chain.clear();
  hit.host_blocks = std::move(host_chain);
  hit.tokens = static_cast<int64_t>(best) * block_size_;
  return hit;
}

void PrefixCache::use(const PrefixHit& hit, BlockTable& table) {
  if (table.num_blocks() != 0) throw std::logic_error("PrefixCache::use: the table is not empty");
  for (const BlockHandle& h : hit.blocks) {
    blocks_.share(h, table);
    set_evictable(h.id, false);
  }
  table.append_tokens(hit.device_tokens(block_size_));
  if (hit.snapshot >= 0) {
    Snapshot& s = snapshot_of(hit.snapshot);
    snapshot_lru_.splice(snapshot_lru_.end(), snapshot_lru_, s.lru);
    ++s.uses;
  }
}

void PrefixCache::insert(const BlockTable& table, std::span<const int32_t> tokens, std::span<const PrefixKey> keys,
                         int64_t num_tokens, PrefixKey root) {
  const size_t n = std::min({static_cast<size_t>(std::max<int64_t>(0, num_tokens) / block_size_), keys.size(),
                             static_cast<size_t>(table.num_blocks()),
                             tokens.size() / static_cast<size_t>(block_size_)});
  BlockHandle parent;
  PrefixKey check = root;  // as lookup() starts it
  for (size_t i = 0; i < n; ++i) {
    const auto toks = block_tokens(tokens, i, block_size_);
    check = check_key(check, toks);
    if (const Entry* e = match(keys[i], toks, parent, root)) {
      parent = e->self;  // this content is cached already (maybe in another block)
      continue;
    }
    const BlockHandle h = table.blocks()[i];
    if (auto it = by_key_.find(keys[i]); it != by_key_.end() && it->second != h.id) {
      // The key names another chain: one whose parent was evicted (unreachable: forget its
      // key), or a true collision (keep it; this chain stays uncached from here on).
      const Entry& other = entries_[static_cast<size_t>(it->second)];
      const Entry& op = entries_[static_cast<size_t>(std::max<BlockId>(0, other.parent.id))];
      const bool stale = other.parent.valid() && !(op.cached && op.self == other.parent);
      if (!stale) return;
      by_key_.erase(it);
    }
    Entry& e = entries_[static_cast<size_t>(h.id)];
    if (e.cached) {
      // Recorded before under a parent that has since been evicted: link it to this chain.
      if (!(e.self == h) || e.key != keys[i] || !std::equal(toks.begin(), toks.end(), e.tokens.begin(), e.tokens.end()))
        return;
      e.parent = parent;
      e.check = check;
      e.parent_key = i > 0 ? keys[i - 1] : root;
      e.root = root;
    } else {
      blocks_.retain(h);
      e.cached = true;
      e.self = h;
      e.parent = parent;
      e.key = keys[i];
      e.check = check;
      e.parent_key = i > 0 ? keys[i - 1] : root;
      e.root = root;
      e.tokens.assign(toks.begin(), toks.end());
      e.snapshot = -1;
      e.evictable = false;
      ++num_cached_;
    }
    by_key_[keys[i]] = h.id;
    parent = h;
  }
}

std::optional<SlotId> PrefixCache::add_snapshot(std::span<const int32_t> tokens, std::span<const PrefixKey> keys,
                                                int64_t position, PrefixKey root) {
  if (position <= 0 || position % block_size_ != 0) return std::nullopt;
  const size_t n = static_cast<size_t>(position / block_size_);
  if (n > keys.size() || n * static_cast<size_t>(block_size_) > tokens.size()) return std::nullopt;
  BlockHandle parent;
  const Entry* last = nullptr;
  SlotId ancestor = -1;  // the deepest snapshot before this one on the chain
  for (size_t i = 0; i < n; ++i) {
    last = match(keys[i], block_tokens(tokens, i, block_size_), parent, root);
    if (!last) return std::nullopt;
    parent = last->self;
    if (i + 1 < n && last->snapshot >= 0) ancestor = last->snapshot;
  }
  Entry& e = entries_[static_cast<size_t>(last->self.id)];
  if (e.snapshot >= 0) return std::nullopt;
  // Superseded: a request that extends this chain will now hit the new snapshot. An ancestor
  // that at most one request resumed from (a conversation's previous turn) goes to the front
  // of the eviction order; one that several shared (a system prompt) keeps its place.
  if (ancestor >= 0 && snapshot_of(ancestor).uses <= 1) {
    Snapshot& a = snapshot_of(ancestor);
    snapshot_lru_.splice(snapshot_lru_.begin(), snapshot_lru_, a.lru);
  }
  if (free_snapshots_.empty()) {
    if (snapshot_lru_.empty()) return std::nullopt;  // no snapshot slots at all
    const SlotId victim = snapshot_lru_.front();
    detach_snapshot(entries_[static_cast<size_t>(snapshot_of(victim).block)], true);
    ++evicted_snapshots_;
  }
  const SlotId slot = free_snapshots_.back();
  free_snapshots_.pop_back();
  Snapshot& s = snapshot_of(slot);
  s.block = e.self.id;
  s.uses = 0;
  s.lru = snapshot_lru_.insert(snapshot_lru_.end(), slot);
  e.snapshot = slot;
  if (host_) unsaved_.push_back(slot);
  return slot;
}

void PrefixCache::drop_snapshot(SlotId slot) {
  if (slot < first_snapshot_ || slot >= first_snapshot_ + static_cast<SlotId>(snapshots_.size())) return;
  const Snapshot& s = snapshot_of(slot);
  if (s.block >= 0) detach_snapshot(entries_[static_cast<size_t>(s.block)], false);
}

bool PrefixCache::has_snapshot(std::span<const int32_t> tokens, std::span<const PrefixKey> keys,
                               int64_t position, PrefixKey root) const {
  if (position <= 0 || position % block_size_ != 0) return false;
  const size_t n = static_cast<size_t>(position / block_size_);
  if (n > keys.size() || n * static_cast<size_t>(block_size_) > tokens.size()) return false;
  BlockHandle parent;
  const Entry* last = nullptr;
  for (size_t i = 0; i < n; ++i) {
    last = match(keys[i], block_tokens(tokens, i, block_size_), parent, root);
    if (!last) return false;
    parent = last->self;
  }
  return last->snapshot >= 0;
}

void PrefixCache::detach_snapshot(Entry& e, bool offload) {
  if (e.snapshot < 0) return;
  if (offload && host_ && std::find(unsaved_.begin(), unsaved_.end(), e.snapshot) == unsaved_.end())
    if (auto h = host_->store_snapshot(e.key, e.check)) offloads_.states.push_back({e.snapshot, *h});
  Snapshot& s = snapshot_of(e.snapshot);
  snapshot_lru_.erase(s.lru);
  s.block = -1;
  free_snapshots_.push_back(e.snapshot);
  e.snapshot = -1;
}

void PrefixCache::release(BlockTable& table) {
  std::vector<BlockHandle> held(table.blocks().rbegin(), table.blocks().rend());  // deepest first
  blocks_.free_table(table);
  for (const BlockHandle& h : held) {
    const Entry& e = entries_[static_cast<size_t>(h.id)];
    if (e.cached && e.self == h && blocks_.refcount(h) == 1) set_evictable(h.id, true);
  }
}

void PrefixCache::set_evictable(BlockId id, bool evictable) {
  Entry& e = entries_[static_cast<size_t>(id)];
  if (!e.cached || e.evictable == evictable) return;
  if (evictable)
    e.lru = evictable_.insert(evictable_.end(), id);
  else
    evictable_.erase(e.lru);
  e.evictable = evictable;
}

void PrefixCache::evict(BlockId id, bool offload) {
  Entry& e = entries_[static_cast<size_t>(id)];
  if (!e.cached) return;
  detach_snapshot(e, offload);
  if (offload && host_)
    if (auto h = host_->store_block(e.key, e.check, e.parent_key, e.tokens)) offloads_.blocks.push_back({id, *h});
  set_evictable(id, false);
  if (auto it = by_key_.find(e.key); it != by_key_.end() && it->second == id) by_key_.erase(it);
  e.cached = false;
  e.tokens.clear();
  --num_cached_;
  blocks_.release(e.self);  // the cache's reference; frees the block when it was the last
}

bool PrefixCache::make_free(int32_t n) {
  while (blocks_.num_free() < n && !evictable_.empty()) {
    evict(evictable_.front());
    ++evicted_blocks_;
  }
  return blocks_.num_free() >= n;
}

int32_t PrefixCache::available_blocks() const {
  return blocks_.num_free() + static_cast<int32_t>(evictable_.size());
}

void PrefixCache::clear() {
  for (size_t id = 0; id < entries_.size(); ++id) evict(static_cast<BlockId>(id), false);
  by_key_.clear();
}

Offloads PrefixCache::take_offloads() { return std::exchange(offloads_, {}); }

bool PrefixCache::is_cached(BlockId id) const {
  return id >= 0 && static_cast<size_t>(id) < entries_.size() && entries_[static_cast<size_t>(id)].cached;
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s;
  s.blocks = num_cached_;
  s.evictable_blocks = static_cast<int32_t>(evictable_.size());
  s.snapshot_capacity = static_cast<int32_t>(snapshots_.size());
  s.snapshots = s.snapshot_capacity - static_cast<int32_t>(free_snapshots_.size());
  s.evicted_blocks_total = evicted_blocks_;
  s.evicted_snapshots_total = evicted_snapshots_;
  return s;
}

void PrefixCache::check_invariants() const {
  auto fail = [](const std::string& m) { throw std::logic_error("prefix cache invariant: " + m); };
  int32_t cached = 0, evictable = 0, attached = 0;
  for (size_t id = 0; id < entries_.size(); ++id) {
    const Entry& e = entries_[id];
    if (!e.cached) {
      if (e.evictable || e.snapshot >= 0) fail("block " + std::to_string(id) + " is not cached but listed");
      continue;
    }
    ++cached;
    const std::string who = "cached block " + std::to_string(id);
    if (!blocks_.is_live(e.self) || e.self.id != static_cast<BlockId>(id)) fail(who + " is not a live block");
    if (static_cast<int32_t>(e.tokens.size()) != block_size_) fail(who + " does not hold a whole block");
    const int32_t refs = blocks_.refcount(e.self);
    if (e.evictable != (refs == 1)) fail(who + " has " + std::to_string(refs) + " references but evictable=" +
                                         std::to_string(e.evictable));
    if (e.evictable) ++evictable;
    if (e.snapshot >= 0) {
      ++attached;
      if (e.snapshot < first_snapshot_ || e.snapshot >= first_snapshot_ + static_cast<SlotId>(snapshots_.size()))
        fail(who + " has a snapshot slot out of range");
      if (snapshots_[static_cast<size_t>(e.snapshot - first_snapshot_)].block != static_cast<BlockId>(id))
        fail(who + "'s snapshot belongs to another block");
    }
  }
  if (cached != num_cached_) fail("cached count is off");
  if (host_) host_->check_invariants();
  if (evictable != static_cast<int32_t>(evictable_.size())) fail("the LRU list and the evictable entries differ");
  for (BlockId id : evictable_)
    if (!entries_[static_cast<size_t>(id)].evictable) fail("LRU lists a block that is not evictable");
  for (const auto& [key, id] : by_key_)
    if (!entries_[static_cast<size_t>(id)].cached || entries_[static_cast<size_t>(id)].key != key)
      fail("a key maps to a block not cached under it");
  if (attached + static_cast<int32_t>(free_snapshots_.size()) != static_cast<int32_t>(snapshots_.size()))
    fail("snapshot slots are neither attached nor free");
  if (attached != static_cast<int32_t>(snapshot_lru_.size())) fail("snapshot LRU and attached snapshots differ");
  for (SlotId s : free_snapshots_)
    if (snapshots_[static_cast<size_t>(s - first_snapshot_)].block != -1) fail("a free snapshot slot is attached");
}

}  // namespace ds::kvcache
