// KvPoolLayout: where a token's K or V row sits inside one layer's pool.
//
// Each full-attention layer has a K pool and a V pool shaped [num_blocks, block_size,
// n_kv_heads, head_dim]. For f32/bf16/f16 the element offset of (block, offset, head, d) is
// ((block * block_size + offset) * n_kv_heads + head) * head_dim + d. Quantised pools (Q8_0,
// Q4_0) keep the same row order, with a row of head_dim values stored in row_bytes() bytes.
// Every product is taken in 64 bits: a pool may exceed 2^32 elements and bytes (131,073
// blocks of [32, 8, 128] is 4.3e9 elements), and 32-bit offsets there silently alias.
#pragma once

#include <cstdint>
#include <stdexcept>

#include "kernels/dtype.h"
#include "kvcache/block_table.h"

namespace ds::kvcache {

struct KvPoolLayout {
  int64_t num_blocks = 0;
  int64_t block_size = 16;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  DType dtype = DType::f32;

  // Throws std::invalid_argument for non-positive sizes or a quantised type whose head_dim is
  // not a multiple of 32.
  void validate() const;

  int64_t rows() const { return num_blocks * block_size * n_kv_heads; }
  int64_t elements() const { return rows() * head_dim; }
  int64_t row_bytes() const { return ds::row_bytes(dtype, head_dim); }
  int64_t bytes() const { return rows() * row_bytes(); }
  int64_t block_bytes() const { return block_size * n_kv_heads * row_bytes(); }

  // Index of the [head_dim] row of (block, offset, head).
  int64_t row_index(int64_t block, int64_t offset, int64_t head) const {
    return (block * block_size + offset) * n_kv_heads + head;
  }
  // Element offset of (block, offset, head, d); meaningful for unquantised types.
  int64_t element_offset(int64_t block, int64_t offset, int64_t head, int64_t d = 0) const {
    return row_index(block, offset, head) * head_dim + d;
  }
  // Byte offset of the row of (block, offset, head); valid for every type.
  int64_t byte_offset(int64_t block, int64_t offset, int64_t head) const {
    return row_index(block, offset, head) * row_bytes();
  }
  int64_t byte_offset(TokenSlot s, int64_t head) const { return byte_offset(s.block, s.offset, head); }
};

}  // namespace ds::kvcache
