// PrefixCache: K/V blocks and DeltaNet state snapshots kept after the sequences that computed
// them move on, and found again by the tokens they hold.
//
// Blocks. A full block is named by a chain key: a hash of its parent's key and its own
// tokens (prefix_key.h). The cache holds one reference on every block it records (so the pool
// never frees it underneath) and an entry with the block's tokens and its parent block; a
// lookup walks a prompt's chain keys and accepts a block only when its tokens and its parent
// are exactly those of the prompt's previous block, so a hash collision can shorten a hit but
// never make a wrong one. Blocks whose only reference is the cache's are evictable, in LRU
// order; blocks released together are queued deepest first, so a chain loses its tail before
// its head. Eviction happens only when an allocation needs blocks (make_free).
//
// Snapshots. A prefix's K/V is useless to a hybrid model without the DeltaNet state at its
// end, which the blocks cannot rebuild. Snapshot slots are state slots of their own (ids
// first_snapshot_slot.. in the model's state arrays), each attached to the cached block that
// ends at the snapshot's position, with their own LRU; a hit is the longest cached chain
// whose last block carries a snapshot. Evicting a block drops its snapshot. A snapshot that a
// deeper one on the same chain supersedes, and that at most one hit used (a conversation's
// previous turn: its next turn will hit the new one), is evicted first; LRU otherwise. Plain
// LRU thrashes when the conversations in flight need more snapshots than there are slots
// (docs/bench-log, "Prefix caching", "The 27B").
//
// Host tier (host_cache.h, with a HostCache): what eviction drops is stored there instead --
// an evicted block (K/V) and an evicted snapshot (the DeltaNet state) each get a host slot,
// and the copies to make are queued for the engine (take_offloads), which runs them before
// anything reuses the device memory. A lookup continues a prompt's chain past the device's
// blocks into the host's and takes the deepest snapshot of either tier: the hit's device
// blocks are shared as before, its host blocks and host snapshot loaded (PrefixHit).
//
// The cache does bookkeeping only: the scheduler copies states between slots (through the
// model) and shares blocks into tables. Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvcache/block_pool.h"
#include "kvcache/host_cache.h"
#include "kvcache/prefix_key.h"
#include "kvcache/state_pool.h"

namespace ds::kvcache {

struct PrefixHit {
  std::vector<BlockHandle> blocks;  // the hit's device blocks, in order
  SlotId snapshot = -1;             // the state at the hit's end, in a device snapshot slot
  // Host tier: the hit's blocks after the device ones, and the state at its end when the
  // device holds no snapshot there (then snapshot is -1).
  std::vector<HostBlockId> host_blocks;
  HostSlotId host_snapshot = -1;
  int64_t tokens = 0;               // (blocks + host_blocks) * block_size
  int64_t matched_tokens = 0;       // cached blocks matched (either tier), with or without a snapshot
  bool from_host() const { return !host_blocks.empty() || host_snapshot >= 0; }
  int64_t device_tokens(int32_t block_size) const { return static_cast<int64_t>(blocks.size()) * block_size; }
};

// The copies that evictions asked for (device -> host), to run before the device memory they
// read is used again.
struct Offloads {
  std::vector<BlockTransfer> blocks;
  std::vector<StateTransfer> states;
  bool empty() const { return blocks.empty() && states.empty(); }
};

struct PrefixCacheStats {
  int32_t blocks = 0;            // cached blocks (referenced by sequences or not)
  int32_t evictable_blocks = 0;  // cached blocks only the cache references
  int32_t snapshots = 0;
  int32_t snapshot_capacity = 0;
  int64_t evicted_blocks_total = 0;
  int64_t evicted_snapshots_total = 0;
};

class PrefixCache {
 public:
  // host: the host tier, or null (it must outlive the cache).
  PrefixCache(BlockPool& blocks, SlotId first_snapshot_slot, int32_t num_snapshots, HostCache* host = nullptr);
  ~PrefixCache();  // gives every cached block back to the pool
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  int32_t block_size() const { return block_size_; }

  // The longest cached prefix of `tokens` of at most max_tokens tokens that ends at a
  // snapshot. keys = prefix_keys(tokens) (at least as many as the blocks looked at).
  // root: the chain's root key (prefix_key.h): a first block matches only a lookup with the
  // root it was inserted with (what keeps the K/V of one LoRA adapter from another's
  // prompts). Every call below takes it, 0 by default.
  PrefixHit lookup(std::span<const int32_t> tokens, std::span<const PrefixKey> keys, int64_t max_tokens,
                   PrefixKey root = 0) const;

  // Shares the hit's device blocks into an empty table (a reference each) and marks the hit
  // recently used. The table then holds hit.device_tokens() tokens; the caller adds blocks
  // for the host blocks and loads them (pinned in the HostCache while it does).
  void use(const PrefixHit& hit, BlockTable& table);

  // Records the full blocks among the first num_tokens tokens of table (whose tokens are
  // `tokens`) that are not cached yet; the cache takes a reference on each.
  void insert(const BlockTable& table, std::span<const int32_t> tokens, std::span<const PrefixKey> keys,
              int64_t num_tokens, PrefixKey root = 0);

  // A snapshot slot for the state at `position` (a multiple of the block size whose blocks
  // are cached by insert()), attached to the block ending there; nullopt when that block
  // already has one, is not cached, or no slot can be had. The caller copies the state into
  // the slot; if that fails it must drop_snapshot(). Until the caller says the copies are
  // queued (snapshots_saved), such a snapshot is not offloaded when evicted: its slot does not
  // hold it yet.
  std::optional<SlotId> add_snapshot(std::span<const int32_t> tokens, std::span<const PrefixKey> keys,
                                     int64_t position, PrefixKey root = 0);
  void drop_snapshot(SlotId slot);
  void snapshots_saved() { unsaved_.clear(); }
  // Whether a snapshot exists for the prefix of this many tokens (a multiple of the block size).
  bool has_snapshot(std::span<const int32_t> tokens, std::span<const PrefixKey> keys, int64_t position,
                    PrefixKey root = 0) const;

  // Drops one reference per block of table and empties it; cached blocks left with only the
  // cache's reference become evictable (deepest first).
  void release(BlockTable& table);

  // Evicts least recently used evictable blocks until n blocks are free in the pool; false
  // (having evicted what it could) when that is not possible.
  bool make_free(int32_t n);
  // Blocks that are free or could be made free.
  int32_t available_blocks() const;

  // Forgets everything: every cached block and snapshot goes (blocks still in tables stay),
  // nothing to the host tier.
  void clear();

  // The host tier (null without one), and the copies evictions queued since the last call.
  HostCache* host() const { return host_; }
  Offloads take_offloads();
  // Stops using the host tier (its copies failed: what it holds cannot be trusted).
  void drop_host() {
    host_ = nullptr;
    offloads_ = {};
  }

  PrefixCacheStats stats() const;
  // Checks the entries against the pool (tests): cached blocks live and referenced, evictable
  // exactly when the cache's reference is the last, keys and snapshots consistent. Throws
  // std::logic_error naming the first inconsistency.
  void check_invariants() const;
  // Whether block id is recorded (tests).
  bool is_cached(BlockId id) const;

 private:
  struct Entry {
    bool cached = false;
    BlockHandle self;
    BlockHandle parent;  // invalid for a first block
    PrefixKey key = 0;
    PrefixKey root = 0;  // a first block's chain root
    PrefixKey check = 0;       // check_key of the prefix through this block (host tier)
    PrefixKey parent_key = 0;  // the parent's chain key (the root for a first block)
    std::vector<int32_t> tokens;
    SlotId snapshot = -1;
    bool evictable = false;
    std::list<BlockId>::iterator lru;
  };
  struct Snapshot {
    BlockId block = -1;  // -1 = free
    int32_t uses = 0;    // hits that resumed from it
    std::list<SlotId>::iterator lru;
  };

  // The cached block for chain position i given the previous block (or nullptr).
  const Entry* match(PrefixKey key, std::span<const int32_t> block_tokens, BlockHandle parent, PrefixKey root) const;
  void set_evictable(BlockId id, bool evictable);
  // offload: store what leaves in the host tier (not when clearing, nor for a snapshot whose
  // copy failed).
  void evict(BlockId id, bool offload = true);
  void detach_snapshot(Entry& e, bool offload);
  Snapshot& snapshot_of(SlotId slot) { return snapshots_[static_cast<size_t>(slot - first_snapshot_)]; }

  BlockPool& blocks_;
  int32_t block_size_;
  SlotId first_snapshot_;
  std::vector<Entry> entries_;                    // by block id
  std::unordered_map<PrefixKey, BlockId> by_key_;
  std::list<BlockId> evictable_;                  // front = next to evict
  std::vector<Snapshot> snapshots_;               // by slot - first_snapshot_
  std::vector<SlotId> free_snapshots_;
  std::list<SlotId> snapshot_lru_;                // front = next to evict
  HostCache* host_;
  Offloads offloads_;
  std::vector<SlotId> unsaved_;  // snapshot slots add_snapshot gave out since snapshots_saved()
  int32_t num_cached_ = 0;
  int64_t evicted_blocks_ = 0, evicted_snapshots_ = 0;
};

}  // namespace ds::kvcache
