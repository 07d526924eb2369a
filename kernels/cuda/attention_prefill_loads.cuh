// The loads of the paged prefill attention kernel (attention_prefill.cuh): Q rows to bf16,
// each tile's pool rows, and K/V tiles into wgmma's swizzled layout -- by cp.async for bf16
// pools, widened to bf16 by the threads for the others. Included by attention_prefill.cu only.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/attention_prefill_layout.cuh"
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace ds::cuda::ops {
namespace {

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The pool row of each key of the tile starting at k0 (KV head h), -1 at or past key_end: one
// thread per key, so the loads below need no division by the block size.
__device__ __forceinline__ void tile_rows(const PrefillAttention& a, int32_t k0, int32_t key_end, int32_t h,
                                          int64_t* rows) {
  if (threadIdx.x < kKeys) {
    const int32_t p = k0 + static_cast<int32_t>(threadIdx.x);
    rows[threadIdx.x] =
        p < key_end ? (static_cast<int64_t>(a.block_table[p / a.block_size]) * a.block_size + p % a.block_size) *
                              a.n_kv_heads + h
                    : -1;
  }
}

// Elements 8c .. 8c + 7 of a K/V row of type t (not bf16: that one is copied as it is). The
// quantised blocks hold 32 elements, so the eight share one scale.
__device__ __forceinline__ void widen8(DType t, const uint8_t* row, int c, float (&x)[8]) {
  switch (t) {
    case DType::f32: {
      const float4 a = reinterpret_cast<const float4*>(row)[2 * c], b = reinterpret_cast<const float4*>(row)[2 * c + 1];
      x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
      return;
    }
    case DType::bf16:
    case DType::f16: {
      const uint4 u = reinterpret_cast<const uint4*>(row)[c];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const uint32_t h = (w[e / 2] >> (16 * (e % 2))) & 0xffffu;
        x[e] = t == DType::bf16 ? detail::bf16_bits_to_f32(h) : detail::f16_bits_to_f32(h);
      }
      return;
    }
    case DType::q8_0: {
      const uint8_t* blk = row + 34 * (c / 4);
      const float d = detail::f16_bits_to_f32(detail::load_u16(blk));
      const uint8_t* q = blk + 2 + 8 * (c % 4);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = d * static_cast<float>(static_cast<int8_t>(q[e]));
      return;
    }
    case DType::q4_0: {
      const uint8_t* blk = row + 18 * (c / 4);
      const float d = detail::f16_bits_to_f32(detail::load_u16(blk));
      const int j0 = 8 * (c % 4);  // elements j0 .. j0 + 7: low nibbles of bytes j0.. (j0 < 16), else high of j0 - 16..
      const uint8_t* q = blk + 2 + (j0 & 15);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = d * static_cast<float>((j0 < 16 ? (q[e] & 0x0F) : (q[e] >> 4)) - 8);
      return;
    }
  }
}

// A tile of keys (pool rows `rows`, from tile_rows) into a swizzled bf16 tile (wgmma.cuh's
// layout); absent keys are 0.
template <int D, bool kBf16Pool>
__device__ __forceinline__ void load_kv_tile(const void* pool, DType type, int64_t row_bytes, const int64_t* rows,
                                             uint8_t* tile) {
  // Each thread copies one 16-byte column chunk of every kRowsPerPass-th key.
  constexpr int kChunks = D / 8, kRowsPerPass = kThreads / kChunks;
  const int c = static_cast<int>(threadIdx.x) % kChunks, j0 = static_cast<int>(threadIdx.x) / kChunks;
#pragma unroll
  for (int m = 0; m < kKeys / kRowsPerPass; ++m) {
    const int j = j0 + m * kRowsPerPass;
    const int64_t row = rows[j];
    if constexpr (kBf16Pool) {
      const auto* src = static_cast<const uint8_t*>(pool) + (row >= 0 ? row * D * 2 + c * 16 : 0);
      detail::cp_async<16>(detail::smem_addr(tile + detail::sw128_offset<kKeys>(j, c)), src, row >= 0 ? 16 : 0);
    } else {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (row >= 0) {
        float x[8];
        widen8(type, static_cast<const uint8_t*>(pool) + row * row_bytes, c, x);
        v = make_uint4(pack_bf16(x[0], x[1]), pack_bf16(x[2], x[3]), pack_bf16(x[4], x[5]), pack_bf16(x[6], x[7]));
      }
      *reinterpret_cast<uint4*>(tile + detail::sw128_offset<kKeys>(j, c)) = v;
    }
  }
}

// The CTA's Q rows r0 .. r0 + kRows - 1 (f32 in memory; rows past the chunk zero) to bf16 in
// the swizzled tile q_s.
template <int D>
__device__ __forceinline__ void load_q_rows(const Params& p, int tid, int64_t r0, int32_t h, int32_t G,
                                            uint8_t* q_s) {
  const PrefillAttention& a = p.a;
  for (int i = tid; i < kRows * D / 8; i += kThreads) {
    const int r = i / (D / 8), c = i % (D / 8);
    const int64_t R = r0 + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (R < p.rows) {
      const int64_t t = R / G, head = static_cast<int64_t>(h) * G + R % G;
      const float4* src = reinterpret_cast<const float4*>(a.q + (t * a.n_q_heads + head) * D + c * 8);
      const float4 x = src[0], y = src[1];
      v = make_uint4(pack_bf16(x.x, x.y), pack_bf16(x.z, x.w), pack_bf16(y.x, y.y), pack_bf16(y.z, y.w));
    }
    *reinterpret_cast<uint4*>(q_s + detail::sw128_offset<kRows>(r, c)) = v;
  }
}

}  // namespace
}  // namespace ds::cuda::ops
