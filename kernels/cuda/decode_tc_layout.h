// Shared-memory layout and shape rules of the tensor-core decode kernel (decode_tc.cuh), as
// constexpr functions the host's planning (decode_chooser.cpp) and the kernel both read.
//
// Per-head blocks: [warps][stages][16 K rows | 16 V rows], then q ([8] rows of up to D fp32,
// padded), then one 8-byte barrier per warp and stage. The final cross-warp merge reuses the
// stages. Token-row tiles: [stages][16 token rows of every head, K then V], q ([warps][8] rows)
// in the last stage (filled only once q is in registers), then the barriers.
//
// Internal to kernels/cuda; plain C++.
#pragma once

#include <cstdint>

#include "kernels/cuda/decode_launch.h"
#include "kernels/dtype.h"

namespace ds::cuda::detail {

constexpr int tc_row_bytes(DType t, int D) { return static_cast<int>(row_bytes(t, D)); }
// cp.async granule: 16 bytes, or 8 for the 136- and 72-byte quantised rows of head_dim 128.
constexpr int tc_chunk_bytes(int rb) { return rb % 16 == 0 ? 16 : 8; }
// The final cross-warp merge, over the pipeline's buffers.
// Maxima and sums [warps][8] each, the heads' log-sum-exps [8], then the rows [warps][8][D + 4].
constexpr int tc_merge_o_offset() { return ((2 * kTcWarps * kTcHeads + kTcHeads) * 4 + 15) / 16 * 16; }
constexpr int tc_merge_bytes(int D) { return tc_merge_o_offset() + kTcWarps * kTcHeads * (D + 4) * 4; }
// q of the block's heads, copied in as the first cp.async group and read from there: one row
// of up to D fp32 per head, padded by 16 bytes so the eight heads' rows start in different banks.
constexpr int tc_q_row_bytes(int D) { return 4 * D + 16; }
constexpr int tc_q_bytes(int D) { return kTcHeads * tc_q_row_bytes(D); }
// Byte offset of the q area: after the pipeline stages (or the merge area, when larger).
constexpr int64_t tc_q_offset(int64_t stage_bytes_all, int D) {
  const int64_t m = stage_bytes_all > tc_merge_bytes(D) ? stage_bytes_all : tc_merge_bytes(D);
  return (m + 127) / 128 * 128;
}
// After q: one 8-byte barrier per warp and stage (up to 8 stages) for bulk tile copies.
constexpr int tc_bar_bytes() { return kTcWarps * 8 * 8; }
// Bulk tensor copies serve both operands when both rows are whole 16-byte units (quantised
// K and V at head_dim 256; bf16/f16 tiles need the XOR swizzle of the cp.async path).
constexpr bool tc_tma_capable(DType k, DType v, int D) {
  return is_quantized(k) && is_quantized(v) && row_bytes(k, D) % 16 == 0 && row_bytes(v, D) % 16 == 0;
}
// Token-row tiles (sm_90, quantised K and V at head_dim 256, as many KV heads as warps): one
// block per chunk covers every KV head, warp w computing head w, and each stage is the
// chunk's next 16 whole token rows of the pool (all heads: a contiguous range), one bulk
// tensor copy per operand that lands head by head ([head][16][row], tma_pool_map.h).
// Quantised rows (272 / 144 bytes) do not fill whole 128-byte lines, so a block per head
// reads lines it shares with its neighbours' blocks; whole token rows are contiguous.
constexpr bool tc_token_rows_capable(DType k, DType v, int D) { return tc_tma_capable(k, v, D); }
// One stage of the token-row pipeline: 16 token rows of K, then of V, all kTcWarps heads.
constexpr int64_t tc_token_rows_stage_bytes(DType k, DType v, int D) {
  return int64_t{16} * kTcWarps * (row_bytes(k, D) + row_bytes(v, D));
}
// q of every warp's heads ([warps][8] rows) lives in the last stage's buffer, which is first
// filled after q is in registers; it spills past the stages when larger than one stage. The
// output rows ([warps][8][D + 4] fp32, the same size) reuse the same space at the end.
constexpr int64_t tc_token_rows_q_bytes(int D) { return int64_t{kTcWarps} * tc_q_bytes(D); }
constexpr int64_t tc_token_rows_smem_bytes(int64_t stage_bytes, int stages, int D) {
  const int64_t last = stage_bytes > tc_token_rows_q_bytes(D) ? stage_bytes : tc_token_rows_q_bytes(D);
  return ((stages - 1) * stage_bytes + last + 127) / 128 * 128 + tc_bar_bytes();
}
// Resident blocks per SM the register budget is cut for. Q4_0/Q4_0 at head_dim 256 fits 168
// registers without spills and runs three blocks of three stages per SM (the kernel's
// instructions, not bytes, bound it); see docs/bench-log for the comparison with two
// blocks of five stages.
constexpr int tc_min_blocks(DType k, DType v, int D) {
  return k == DType::q4_0 && v == DType::q4_0 && D == 256 ? 3 : 1;
}

}  // namespace ds::cuda::detail
