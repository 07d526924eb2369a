// Device pieces the decode-sized GEMMs share (gemv.cu, skinny_gemm.cu, fp8_gemm.cu): the
// warp-per-row weight stream of the one-row GEMVs, over a row reader that says how a 16-byte
// weight vector is stored (bf16 here; FP8 codes with their scales in fp8_gemm.cu), and the
// bf16 tensor-core step of the skinny GEMMs.
//
// Internal to kernels/cuda.
#pragma once

#include "kernels/cuda/backend_common.cuh"

namespace ds::cuda::ops {

__device__ __forceinline__ void bf16x8_to_f32(const uint4& v, float* f) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// A bf16 weight row: 16-byte vector v holds elements 8v..8v+7.
struct Bf16Row {
  static constexpr int kPerVector = 8;
  struct X {
    float f[8];
  };
  const uint4* w;
  __device__ __forceinline__ uint4 load(int64_t v) const { return __ldg(w + v); }
  __device__ __forceinline__ static X load_x(const uint16_t* x, int64_t v) {
    X r;
    bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(x) + v), r.f);
    return r;
  }
  __device__ __forceinline__ float accumulate(float sum, const uint4& wv, const X& x, int64_t) const {
    float wf[8];
    bf16x8_to_f32(wv, wf);
#pragma unroll
    for (int i = 0; i < 8; ++i) sum = fmaf(wf[i], x.f[i], sum);
    return sum;
  }
  __device__ __forceinline__ float finish(float sum) const { return sum; }
};

// Dot products of one input row x [K] with R weight rows (row readers) per warp, L 16-byte
// weight loads in flight per lane. The first L loads are issued before waiting for the
// previous kernel; after_wait() runs right after the wait (to start loads of the previous
// kernels' results early). Returns the sums in every lane.
template <int L, class Row, int R, typename AfterWait>
__device__ __forceinline__ void warp_dots(const Row (&rows)[R], const uint16_t* __restrict__ x, int64_t K,
                                          float (&sum)[R], AfterWait after_wait) {
  constexpr int kUnroll = L / R;
  const int lane = threadIdx.x & 31;
  const int64_t vecs = K / Row::kPerVector;  // 16-byte vectors per row
#pragma unroll
  for (int r = 0; r < R; ++r) sum[r] = 0.0f;
  int64_t v = lane;
  uint4 wv[R][kUnroll];
  bool preloaded = v + 32 * (kUnroll - 1) < vecs;
  if (preloaded) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) wv[r][u] = rows[r].load(v + 32 * u);
  }
  wait_for_previous_kernel();  // x (and the output) are the previous kernels' results
  after_wait();
  for (; v + 32 * (kUnroll - 1) < vecs; v += 32 * kUnroll) {
    if (!preloaded) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r) wv[r][u] = rows[r].load(v + 32 * u);
    }
    preloaded = false;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const auto xs = Row::load_x(x, v + 32 * u);
#pragma unroll
      for (int r = 0; r < R; ++r) sum[r] = rows[r].accumulate(sum[r], wv[r][u], xs, v + 32 * u);
    }
  }
  for (; v < vecs; v += 32) {
    const auto xs = Row::load_x(x, v);
#pragma unroll
    for (int r = 0; r < R; ++r) sum[r] = rows[r].accumulate(sum[r], rows[r].load(v), xs, v);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) sum[r] = rows[r].finish(warp_sum(sum[r]));
}

// c (16 x 8, f32) += a (16 x 16, bf16 pairs, row major) · b (16 x 8, bf16 pairs, column major).
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

}  // namespace ds::cuda::ops
