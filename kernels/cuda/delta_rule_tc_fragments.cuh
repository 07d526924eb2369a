// The tile operations of the tensor-core chunked delta rule (delta_rule_tc.cuh): bf16
// packing, mma.sync fragment loads from padded or swizzled shared tiles (ldmatrix through
// mma_sync.cuh), cp.async row copies, and the 16 x 64 product the prepare and output passes
// share. Included by delta_rule_tc.cu only.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/delta_rule_tc_layout.cuh"
#include "kernels/cuda/mma_sync.cuh"

namespace ds::cuda::ops::delta {
namespace {

using detail::cp_async;
using detail::cp_async_commit;
using detail::cp_async_wait;
using detail::ldsm_x4;
using detail::ldsm_x4_trans;
using detail::mma16816;
using detail::mma1688_tf32;
using detail::smem_addr;
using detail::to_tf32;

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Fragment loads, tile row-major in shared memory at `base` with `stride` bytes per row:
// the A operand (16 x 16, rows m0.., columns k0..) of a [m][k] tile, and of a [k][m] tile
// (transposed on the way); B operands for two n-tiles (k16 x n16: {b[0], b[1]} for n0..n0+7,
// {b[2], b[3]} for n0+8..) of a [n][k] tile, and of a [k][n] tile.
template <bool kSwizzled = false>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], uint32_t base, int stride, int m0, int k0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4(a, base + piece_at<kSwizzled>(m0 + lane % 16, k0 / 8 + lane / 16, stride));
}
template <bool kSwizzled = false>
__device__ __forceinline__ void load_a_trans(uint32_t (&a)[4], uint32_t base, int stride, int m0, int k0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4_trans(a, base + piece_at<kSwizzled>(k0 + lane % 8 + (lane / 16) * 8, m0 / 8 + (lane / 8) % 2, stride));
}
__device__ __forceinline__ void load_b_nk(uint32_t (&b)[4], uint32_t base, int stride, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4(b, base + (n0 + lane % 8 + (lane / 16) * 8) * stride + (k0 / 8 + (lane / 8) % 2) * 16);
}
__device__ __forceinline__ void load_b_kn(uint32_t (&b)[4], uint32_t base, int stride, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4_trans(b, base + (k0 + lane % 8 + ((lane / 8) % 2) * 8) * stride + (n0 / 8 + lane / 16) * 16);
}

// Rows x (bytes_per_row / 16) 16-byte copies from global rows `src_stride` bytes apart into
// shared rows `dst_stride` bytes apart, spread over the block.
__device__ __forceinline__ void copy_rows(uint32_t dst, int dst_stride, const uint8_t* src, int64_t src_stride, int rows,
                                          int bytes_per_row) {
  const int per_row = bytes_per_row / 16;
  for (int i = threadIdx.x; i < rows * per_row; i += kThreads) {
    const int r = i / per_row, c = i % per_row;
    cp_async<16>(dst + r * dst_stride + c * 16, src + r * src_stride + c * 16, 16);
  }
}

// o (rows m0 .. m0 + 15, columns n0 .. n0 + 63, in mma accumulators) += A B over the first
// k_steps 16-wide steps of k: A a [m][k] tile (swizzled or padded), B a padded [k][n] tile.
template <bool kSwizzledA = false>
__device__ __forceinline__ void mma_rows_by_64(float (&o)[8][4], uint32_t a_base, int a_stride, int m0, uint32_t b_base,
                                               int b_stride, int n0, int k_steps) {
#pragma unroll 2
  for (int ks = 0; ks < k_steps; ++ks) {
    uint32_t af[4];
    load_a<kSwizzledA>(af, a_base, a_stride, m0, 16 * ks);
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t bf[4];
      load_b_kn(bf, b_base, b_stride, n0 + 16 * np, 16 * ks);
      mma16816<false>(o[2 * np], af, bf[0], bf[1]);
      mma16816<false>(o[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

}  // namespace
}  // namespace ds::cuda::ops::delta
