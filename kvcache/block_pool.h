// BlockPool: the fixed-size K/V blocks shared by every full-attention layer.
//
// A block holds `block_size` consecutive tokens of one sequence. Block id b names the same
// slot in every layer's K and V pool (see kv_layout.h), so one allocation covers all layers.
// This class owns only the bookkeeping; the memory behind block ids belongs to a backend
// (host or device), which is why nothing here touches K/V data.
//
// Rules it enforces:
//  * reserve(n) claims n blocks or none (a Reservation), and the claim is either committed
//    into a sequence's BlockTable or rolled back; a Reservation destroyed uncommitted rolls
//    back by itself, so an exception between reserve and commit leaks nothing.
//  * Every allocated block has a refcount (prefix sharing adds references; release drops one,
//    and the block returns to the free list at zero).
//  * A BlockHandle carries the block's generation, which changes whenever the block goes
//    back to the free list. A stale handle (kept past its block's release) is refused with
//    StaleHandleError: a double free or a use after free is an error, never silently honoured.
//
// Not thread-safe: the engine thread owns the pools.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include "kvcache/block_table.h"

namespace ds::kvcache {

class StaleHandleError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

class BlockPool;

// An all-or-nothing claim on free blocks. Move-only.
class Reservation {
 public:
  Reservation() = default;
  Reservation(Reservation&& other) noexcept;
  Reservation& operator=(Reservation&& other) noexcept;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation();

  int32_t size() const { return static_cast<int32_t>(blocks_.size()); }
  bool empty() const { return blocks_.empty(); }
  const std::vector<BlockHandle>& blocks() const { return blocks_; }

  // Gives the blocks back to the pool; the reservation is empty afterwards.
  void rollback();

 private:
  friend class BlockPool;
  BlockPool* pool_ = nullptr;
  std::vector<BlockHandle> blocks_;
};

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, int32_t block_size);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(state_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t num_reserved() const { return num_reserved_; }
  // Blocks that are not free: allocated to tables or held by reservations.
  int32_t num_used() const { return num_blocks() - num_free(); }

  // Claims n blocks, or returns nullopt and changes nothing when fewer than n are free.
  // n == 0 gives an empty reservation.
  std::optional<Reservation> reserve(int32_t n);

  // Appends the reserved blocks to table (refcount 1 each) and empties the reservation.
  void commit(Reservation& reservation, BlockTable& table);

  // Adds a reference to a live allocated block (prefix sharing) and returns the handle.
  BlockHandle retain(BlockHandle h);
  // Prefix sharing: adds a reference to h and appends it to table.
  void share(BlockHandle h, BlockTable& table);

  // Drops one reference; at zero the block returns to the free list and its generation moves
  // on. Throws StaleHandleError when h no longer names a live allocated block.
  void release(BlockHandle h);

  // Releases every block of table (one reference each) and empties it.
  void free_table(BlockTable& table);
  // Releases the blocks of table after its first keep (one reference each), which must still
  // hold its recorded tokens: speculative decoding gives back the blocks of rejected drafts.
  void free_tail(BlockTable& table, int32_t keep);

  // True when h names a block that is currently allocated with h's generation.
  bool is_live(BlockHandle h) const;
  // Refcount of a live block; throws StaleHandleError otherwise.
  int32_t refcount(BlockHandle h) const;

 private:
  friend class Reservation;
  enum class State : uint8_t { free, reserved, allocated };

  void return_reserved(const std::vector<BlockHandle>& blocks);
  void check_live(BlockHandle h, const char* what) const;
  void to_free_list(BlockId id);

  int32_t block_size_;
  int32_t num_reserved_ = 0;
  std::vector<State> state_;
  std::vector<uint32_t> generation_;
  std::vector<int32_t> refcount_;
  std::vector<BlockId> free_list_;  // a stack: the most recently freed block is reused first
};

}  // namespace ds::kvcache
