// Float64 reference for paged decode attention: the oracle the CUDA kernel is tested against.
//
// One query token per sequence attends to the sequence's first seq_len tokens, read through
// its block table from one layer's K and V pools shaped [num_blocks, block_size, n_kv_heads,
// head_dim] (kvcache/kv_layout.h). Query head h reads KV head h / (n_q_heads / n_kv_heads)
// (contiguous GQA groups). Every stored value is decoded exactly to double (Q8_0 and Q4_0 are
// dequantised with their f16 scale), and softmax(scale * q.k) v is computed in double with the
// usual max subtraction. A sequence of length 0 yields zeros.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/dtype.h"

namespace ds::cpu {

struct PagedDecodeRefArgs {
  int64_t n_seqs = 0;
  int64_t n_q_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  int64_t num_blocks = 0;  // blocks in each pool

  const void* q = nullptr;  // [n_seqs, n_q_heads, head_dim] of q_type (f32, bf16 or f16)
  DType q_type = DType::f32;
  const void* k_pool = nullptr;  // host copy of the K pool
  DType k_type = DType::bf16;
  const void* v_pool = nullptr;
  DType v_type = DType::bf16;

  const int32_t* block_table = nullptr;  // [n_seqs, max_blocks_per_seq] block ids
  int64_t max_blocks_per_seq = 0;
  const int32_t* seq_lens = nullptr;  // [n_seqs]
  double scale = 0.0;                 // softmax scale, usually 1/sqrt(head_dim)
};

// Returns [n_seqs, n_q_heads, head_dim] in double. Throws std::invalid_argument for bad
// shapes or element types and std::out_of_range for a block id outside [0, num_blocks) or a
// sequence longer than its table row.
std::vector<double> paged_attention_decode_ref(const PagedDecodeRefArgs& args);

}  // namespace ds::cpu
