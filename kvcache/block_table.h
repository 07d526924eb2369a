// BlockTable: one sequence's view of the paged K/V cache.
//
// It lists the sequence's blocks in order and how many tokens have been written. Token
// position p lives in block blocks()[p / block_size] at offset p % block_size. The table
// only records; blocks are added by BlockPool::commit (or retain, for shared prefixes) and
// removed by BlockPool::free_table (all) or BlockPool::free_tail (those past its tokens).
#pragma once

#include <cstdint>
#include <vector>

namespace ds::kvcache {

using BlockId = int32_t;

// A reference to an allocated block. `generation` is the block's generation when the handle
// was made; the pool refuses a handle whose generation is no longer current.
struct BlockHandle {
  BlockId id = -1;
  uint32_t generation = 0;
  bool valid() const { return id >= 0; }
  friend bool operator==(const BlockHandle&, const BlockHandle&) = default;
};

// Where one token's K/V row lives.
struct TokenSlot {
  BlockId block;
  int32_t offset;  // 0 <= offset < block_size
};

class BlockTable {
 public:
  explicit BlockTable(int32_t block_size);

  int32_t block_size() const { return block_size_; }
  int64_t num_tokens() const { return num_tokens_; }
  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  // Tokens the committed blocks can hold.
  int64_t capacity() const { return static_cast<int64_t>(blocks_.size()) * block_size_; }
  const std::vector<BlockHandle>& blocks() const { return blocks_; }
  // The block ids alone, in order: what a kernel's block-table row holds.
  const std::vector<BlockId>& block_ids() const { return ids_; }

  // Blocks that must still be committed before n_new more tokens fit.
  int32_t blocks_needed(int64_t n_new) const;

  // Records n more tokens as written. Throws std::out_of_range past capacity().
  void append_tokens(int64_t n);

  // Forgets tokens from position n on (n <= num_tokens()); blocks stay committed.
  void truncate_tokens(int64_t n);

  // Block and offset of token position pos (0 <= pos < capacity()); throws otherwise.
  TokenSlot locate(int64_t pos) const;

 private:
  friend class BlockPool;
  void push_block(BlockHandle h);
  void pop_block();
  void clear();

  int32_t block_size_;
  int64_t num_tokens_ = 0;
  std::vector<BlockHandle> blocks_;
  std::vector<BlockId> ids_;
};

}  // namespace ds::kvcache
