#include "kvcache/block_table.h"

#include <stdexcept>
#include <string>

namespace ds::kvcache {

BlockTable::BlockTable(int32_t block_size) : block_size_(block_size) {
  if (block_size <= 0) throw std::invalid_argument("BlockTable: block_size must be positive");
}

int32_t BlockTable::blocks_needed(int64_t n_new) const {
  if (n_new < 0) throw std::invalid_argument("BlockTable::blocks_needed: negative token count");
  const int64_t want = num_tokens_ + n_new;
  const int64_t blocks = (want + block_size_ - 1) / block_size_;
  const int64_t missing = blocks - static_cast<int64_t>(blocks_.size());
  return missing > 0 ? static_cast<int32_t>(missing) : 0;
}

void BlockTable::append_tokens(int64_t n) {
  if (n < 0) throw std::invalid_argument("BlockTable::append_tokens: negative token count");
  if (num_tokens_ + n > capacity()) {
    throw std::out_of_range("BlockTable::append_tokens: " + std::to_string(num_tokens_ + n) +
                            " tokens exceed the capacity of " + std::to_string(capacity()) +
                            " (commit more blocks first)");
  }
  num_tokens_ += n;
}

void BlockTable::truncate_tokens(int64_t n) {
  if (n < 0 || n > num_tokens_) {
    throw std::out_of_range("BlockTable::truncate_tokens: " + std::to_string(n) +
                            " is outside [0, " + std::to_string(num_tokens_) + "]");
  }
  num_tokens_ = n;
}

TokenSlot BlockTable::locate(int64_t pos) const {
  if (pos < 0 || pos >= capacity()) {
    throw std::out_of_range("BlockTable::locate: position " + std::to_string(pos) +
                            " outside the table's capacity " + std::to_string(capacity()));
  }
  return TokenSlot{ids_[static_cast<size_t>(pos / block_size_)],
                   static_cast<int32_t>(pos % block_size_)};
}

void BlockTable::push_block(BlockHandle h) {
  blocks_.push_back(h);
  ids_.push_back(h.id);
}

void BlockTable::pop_block() {
  blocks_.pop_back();
  ids_.pop_back();
}

void BlockTable::clear() {
  blocks_.clear();
  ids_.clear();
  num_tokens_ = 0;
}

}  // namespace ds::kvcache
