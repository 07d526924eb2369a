// HostCache: the prefix cache's host tier -- bookkeeping of K/V blocks and DeltaNet state
// snapshots that the device prefix cache (prefix_cache.h) evicted, kept in host memory so
// that a later request whose prefix they hold loads them back instead of recomputing.
//
// Blocks. A host block holds one device block's K/V (every attention layer); it is named by
// the block's chain key (prefix_key.h) and checked on every match by a second chain hash of
// the whole prefix (check_key), its parent's chain key and its own tokens. Unlike the device
// cache, a host block's parent cannot be checked by identity (the parent may be on the device
// or on the host, and moves between them), hence the second hash: a wrong hit needs two
// independent 64-bit hashes of different prefixes to collide at once, and anything less costs
// a miss. Snapshots. A host snapshot holds the DeltaNet state at the end of a block, named by
// that block's key and check; it is independent of where the blocks are (the device may have
// evicted a snapshot whose blocks it still holds).
//
// One LRU across the tiers: the device cache's LRU decides what comes here (store_*), and the
// host's LRU decides what leaves (a store evicts the least recently used entry that no load
// is reading). Blocks and snapshots have fixed-size slots of their own (HostTierSizes).
// Entries stay here when a hit loads them back (the tiers are inclusive), so evicting the
// same content from the device again costs no copy.
//
// In flight. A load reads host slots after the call that planned it returns (the copies are
// asynchronous): a pinned entry is never evicted, so its slot is not rewritten under the
// load. The device side of a store is the caller's: the copy into the slot is queued before
// any load can read it (kernels/backend.h orders loads after earlier offloads).
//
// Bookkeeping only, as PrefixCache: the engine moves the bytes (ForwardModel::transfer_host).
// Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kvcache/block_table.h"
#include "kvcache/prefix_key.h"
#include "kvcache/state_pool.h"

namespace ds::kvcache {

using HostBlockId = int32_t;
using HostSlotId = int32_t;

// One block or state copy between the device pools and the host tier.
struct BlockTransfer {
  BlockId device = -1;
  HostBlockId host = -1;
};
struct StateTransfer {
  SlotId device = -1;
  HostSlotId host = -1;
};

// How a byte budget is split: an eighth (at least one slot) for snapshots, the rest K/V
// blocks -- an agent session's prefix is mostly K/V (a 32K-token prefix of a 9B: 1 GiB of K/V,
// one 50 MiB snapshot at each turn's end, of which the superseded go first). Zero of each
// when the budget does not hold one snapshot and one block.
struct HostTierSizes {
  int32_t blocks = 0;
  int32_t snapshots = 0;
  static HostTierSizes from_budget(int64_t bytes, int64_t block_bytes, int64_t snapshot_bytes);
};

struct HostCacheStats {
  int32_t blocks = 0;
  int32_t block_capacity = 0;
  int32_t snapshots = 0;
  int32_t snapshot_capacity = 0;
  int32_t pinned_blocks = 0;     // read by loads in flight
  int32_t pinned_snapshots = 0;
  int64_t stored_blocks_total = 0;     // copied here from the device
  int64_t stored_snapshots_total = 0;
  int64_t evicted_blocks_total = 0;    // dropped from the host to make room
  int64_t evicted_snapshots_total = 0;
};

class HostCache {
 public:
  HostCache(int32_t num_blocks, int32_t num_snapshots, int32_t block_size);
  HostCache(const HostCache&) = delete;
  HostCache& operator=(const HostCache&) = delete;

  int32_t block_size() const { return block_size_; }

  // A block the device evicts: the host slot to copy it into; nullopt when this content is
  // here already (it becomes the most recently used), its key is taken by other content (a
  // collision: the old entry stays), or every slot is pinned.
  std::optional<HostBlockId> store_block(PrefixKey key, PrefixKey check, PrefixKey parent_key,
                                         std::span<const int32_t> tokens);
  // A snapshot the device evicts, at the end of the block (key, check); as store_block.
  std::optional<HostSlotId> store_snapshot(PrefixKey key, PrefixKey check);

  // The host block at a chain position (key and check of the prefix through it, the previous
  // block's key, 0 for the first), or -1.
  HostBlockId find_block(PrefixKey key, PrefixKey check, PrefixKey parent_key, std::span<const int32_t> tokens) const;
  // The host snapshot at the end of the block (key, check), or -1.
  HostSlotId find_snapshot(PrefixKey key, PrefixKey check) const;

  // What a stored entry is (its key, check, parent key and tokens; a snapshot's key and
  // check): what the disk tier writes beside its bytes. The entry must be in use.
  struct BlockInfo {
    PrefixKey key = 0, check = 0, parent = 0;
    std::vector<int32_t> tokens;
  };
  BlockInfo block_info(HostBlockId id) const;
  std::pair<PrefixKey, PrefixKey> snapshot_info(HostSlotId id) const;

  // A hit's entries, read by a load from now until unpin (pins count; pinned entries leave the
  // LRU and come back as the most recently used, a chain's head last, so it leaves last).
  void pin(std::span<const HostBlockId> blocks, HostSlotId snapshot);
  void unpin(std::span<const HostBlockId> blocks, HostSlotId snapshot);

  HostCacheStats stats() const;
  // Checks the entries (tests): keys, LRU lists, free lists and pins consistent. Throws
  // std::logic_error naming the first inconsistency.
  void check_invariants() const;

 private:
  struct Block {
    bool used = false;
    PrefixKey key = 0, check = 0, parent = 0;
    std::vector<int32_t> tokens;
    int32_t pins = 0;
    std::list<HostBlockId>::iterator lru;  // valid while used and not pinned
  };
  struct Snapshot {
    bool used = false;
    PrefixKey key = 0, check = 0;
    int32_t pins = 0;
    std::list<HostSlotId>::iterator lru;
  };
  // A free slot, evicting the least recently used unpinned entry if needed; -1 if none.
  HostBlockId take_block();
  HostSlotId take_snapshot();

  int32_t block_size_;
  std::vector<Block> blocks_;
  std::vector<Snapshot> snapshots_;
  std::unordered_map<PrefixKey, HostBlockId> block_by_key_;
  std::unordered_map<PrefixKey, HostSlotId> snapshot_by_key_;
  std::list<HostBlockId> block_lru_;    // front = next to evict
  std::list<HostSlotId> snapshot_lru_;
  std::vector<HostBlockId> free_blocks_;
  std::vector<HostSlotId> free_snapshots_;
  HostCacheStats counts_;
};

}  // namespace ds::kvcache
