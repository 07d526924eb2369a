// Tensor maps (TMA descriptors) of a K or V pool for the decode kernel's bulk tile copies.
//
// The pool [num_blocks * block_size rows][n_kv_heads][row_bytes] is described as a 3-D
// tensor of 4-byte elements whose box is one head's row bytes for 16 consecutive token rows,
// i.e. one 16-token tile of one KV head as the kernel lays it out in shared memory; or, for
// token-row tiles (all_heads), every head's row bytes for 16 token rows (a contiguous range
// of the pool), landing head by head: [head][16 tokens][row_bytes] in shared memory, so each
// warp's rows keep the one-head stride that spreads its fragment reads over the banks.
//
// Internal to kernels/cuda (CUDA only); plain C++.
#pragma once

#include <cstdint>

namespace ds::cuda::detail {

// Writes the 128-byte map for `pool` into `map` (64-byte aligned). False when the shape does
// not fit a tensor map (row bytes not a multiple of 16 or over 1 KB, more than 2^31 rows, an
// unaligned pool) or the driver has no tensor-map support.
// l2_promotion: 0 (none), 64, 128 or 256 bytes. None for the per-head maps: on the H200,
// promotion made Q8_0 reads (272-byte rows at a 1088-byte stride) slower at long context and
// did nothing for Q4_0. The token-row maps take DecodeOptions::token_rows_l2_promotion (128),
// whose boxes cover whole lines (docs/bench-log, "L2 promotion of token-row boxes").
bool encode_pool_map(void* map, const void* pool, int64_t rows, int32_t n_kv_heads, int64_t row_bytes,
                     bool all_heads = false, int l2_promotion = 0);
// The same through a small cache keyed on the arguments (pools live as long as the engine, and
// encoding costs a driver call per launch otherwise).
bool pool_map(void* map, const void* pool, int64_t rows, int32_t n_kv_heads, int64_t row_bytes,
              bool all_heads = false, int l2_promotion = 0);

}  // namespace ds::cuda::detail
