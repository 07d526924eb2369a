#include "kvcache/block_pool.h"

#include <string>
#include <utility>

namespace ds::kvcache {

// ---- Reservation ---------------------------------------------------------------------

Reservation::Reservation(Reservation&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), blocks_(std::move(other.blocks_)) {
  other.blocks_.clear();
}

Reservation& Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    rollback();
    pool_ = std::exchange(other.pool_, nullptr);
    blocks_ = std::move(other.blocks_);
    other.blocks_.clear();
  }
  return *this;
}

Reservation::~Reservation() { rollback(); }

void Reservation::rollback() {
  if (pool_ && !blocks_.empty()) pool_->return_reserved(blocks_);
  blocks_.clear();
}

// ---- BlockPool -----------------------------------------------------------------------

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size) : block_size_(block_size) {
  if (num_blocks <= 0) throw std::invalid_argument("BlockPool: num_blocks must be positive");
  if (block_size <= 0) throw std::invalid_argument("BlockPool: block_size must be positive");
  state_.assign(static_cast<size_t>(num_blocks), State::free);
  generation_.assign(static_cast<size_t>(num_blocks), 0);
  refcount_.assign(static_cast<size_t>(num_blocks), 0);
  free_list_.reserve(static_cast<size_t>(num_blocks));
  // Low ids on top of the stack, so a fresh pool hands out 0, 1, 2, ...
  for (int32_t id = num_blocks - 1; id >= 0; --id) free_list_.push_back(id);
}

std::optional<Reservation> BlockPool::reserve(int32_t n) {
  if (n < 0) throw std::invalid_argument("BlockPool::reserve: negative block count");
  if (n > num_free()) return std::nullopt;
  Reservation r;
  r.pool_ = this;
  r.blocks_.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const BlockId id = free_list_.back();
    free_list_.pop_back();
    state_[id] = State::reserved;
    r.blocks_.push_back(BlockHandle{id, generation_[id]});
  }
  num_reserved_ += n;
  return r;
}

void BlockPool::commit(Reservation& reservation, BlockTable& table) {
  if (reservation.pool_ != this && !reservation.empty()) {
    throw std::logic_error("BlockPool::commit: the reservation belongs to another pool");
  }
  if (table.block_size() != block_size_) {
    throw std::logic_error("BlockPool::commit: table block size " +
                           std::to_string(table.block_size()) + " != pool block size " +
                           std::to_string(block_size_));
  }
  for (const BlockHandle& h : reservation.blocks_) {
    if (h.id < 0 || h.id >= num_blocks() || state_[h.id] != State::reserved ||
        generation_[h.id] != h.generation) {
      throw StaleHandleError("BlockPool::commit: block " + std::to_string(h.id) +
                             " is no longer reserved by this reservation");
    }
  }
  for (const BlockHandle& h : reservation.blocks_) {
    state_[h.id] = State::allocated;
    refcount_[h.id] = 1;
    table.push_block(h);
  }
  num_reserved_ -= reservation.size();
  reservation.blocks_.clear();
  reservation.pool_ = nullptr;
}

BlockHandle BlockPool::retain(BlockHandle h) {
  check_live(h, "retain");
  ++refcount_[h.id];
  return h;
}

void BlockPool::share(BlockHandle h, BlockTable& table) {
  if (table.block_size() != block_size_) {
    throw std::logic_error("BlockPool::share: table block size differs from the pool's");
  }
  retain(h);
  table.push_block(h);
}

void BlockPool::release(BlockHandle h) {
  check_live(h, "release");
  if (--refcount_[h.id] == 0) to_free_list(h.id);
}

void BlockPool::free_table(BlockTable& table) {
  // Validate first so a bad table changes nothing.
  for (const BlockHandle& h : table.blocks()) check_live(h, "free_table");
  for (const BlockHandle& h : table.blocks()) {
    if (--refcount_[h.id] == 0) to_free_list(h.id);
  }
  table.clear();
}

void BlockPool::free_tail(BlockTable& table, int32_t keep) {
  if (keep < 0 || static_cast<int64_t>(keep) * block_size_ < table.num_tokens())
    throw std::logic_error("BlockPool::free_tail: keeping " + std::to_string(keep) + " blocks would drop " +
                           "recorded tokens of the table");
  const auto& blocks = table.blocks();
  for (size_t i = static_cast<size_t>(keep); i < blocks.size(); ++i) check_live(blocks[i], "free_tail");
  while (table.num_blocks() > keep) {
    const BlockHandle h = blocks.back();
    table.pop_block();
    if (--refcount_[h.id] == 0) to_free_list(h.id);
  }
}

bool BlockPool::is_live(BlockHandle h) const {
  return h.id >= 0 && h.id < num_blocks() && state_[h.id] == State::allocated &&
         generation_[h.id] == h.generation;
}

int32_t BlockPool::refcount(BlockHandle h) const {
  check_live(h, "refcount");
  return refcount_[h.id];
}

void BlockPool::check_live(BlockHandle h, const char* what) const {
  if (h.id < 0 || h.id >= num_blocks()) {
    throw StaleHandleError(std::string("BlockPool::") + what + ": block id " +
                           std::to_string(h.id) + " is out of range [0, " +
                           std::to_string(num_blocks()) + ")");
  }
  if (state_[h.id] != State::allocated || generation_[h.id] != h.generation) {
    throw StaleHandleError(std::string("BlockPool::") + what + ": stale handle for block " +
                           std::to_string(h.id) + " (generation " +
                           std::to_string(h.generation) + ", current " +
                           std::to_string(generation_[h.id]) +
                           (state_[h.id] == State::allocated ? ", reused)" : ", freed)"));
  }
}

void BlockPool::to_free_list(BlockId id) {
  state_[id] = State::free;
  refcount_[id] = 0;
  ++generation_[id];
  free_list_.push_back(id);
}

void BlockPool::return_reserved(const std::vector<BlockHandle>& blocks) {
  for (const BlockHandle& h : blocks) {
    // A reservation only ever holds blocks it reserved; anything else is a logic error that
    // must not corrupt the free list.
    if (h.id < 0 || h.id >= num_blocks() || state_[h.id] != State::reserved ||
        generation_[h.id] != h.generation) {
      continue;
    }
    to_free_list(h.id);
    --num_reserved_;
  }
}

}  // namespace ds::kvcache
