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

// ---- one-row GEMVs over a weight W whose row(n, K) is a row reader (Bf16Row and others)

inline constexpr int kGemvWarps = 4;  // warps per block, one output row (or row pair) per warp
inline constexpr int kGemvLoads = 8;  // 16-byte weight loads in flight per lane

// out[n] (+)= w[n, :] · x, one warp per n. (4 warps x 8 loads x 1 row per warp: measured
// against 16 loads per lane, 8 warps per block and 2 rows per warp on the 9B decode step,
// docs/bench-log; none was faster.)
template <class W>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(W w, const uint16_t* __restrict__ x, int64_t N, int64_t K,
                                                               float* __restrict__ out, bool accumulate) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
  if (n >= N) return;
  const decltype(w.row(0, K)) rows[1] = {w.row(n, K)};
  const bool lead = (threadIdx.x & 31) == 0;
  float prev = 0.0f;
  float s[1];
  // The residual is read right after the wait, so its round trip overlaps the dot products.
  warp_dots<kGemvLoads>(rows, x, K, s, [&] {
    if (accumulate && lead) prev = out[n];
  });
  if (lead) out[n] = prev + s[0];
}

// act[i] = silu(w[i, :] · x) * (w[I + i, :] · x), one warp per i; act f32 or bf16.
template <class W, bool kBf16Out>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_swiglu_kernel(W w, const uint16_t* __restrict__ x, int64_t inter,
                                                                      int64_t K, void* __restrict__ act) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
  if (i >= inter) return;
  const decltype(w.row(0, K)) rows[2] = {w.row(i, K), w.row(inter + i, K)};
  float s[2];
  warp_dots<kGemvLoads>(rows, x, K, s, [] {});
  if ((threadIdx.x & 31) == 0) store_act<kBf16Out>(act, i, silu_f(s[0]) * s[1]);
}

template <class W>
void launch_gemv_swiglu(const W& w, const uint16_t* x, int64_t inter, int64_t K, void* act, DType act_type,
                        Stream stream) {
  if (inter == 0) return;
  const dim3 grid(grid_for(inter, kGemvWarps)), block(kGemvWarps * 32);
  if (act_type == DType::bf16)
    launch_dependent("gate_up + swiglu (skinny) kernel", gemv_swiglu_kernel<W, true>, grid, block, 0, stream, w, x,
                     inter, K, act);
  else
    launch_dependent("gate_up + swiglu (skinny) kernel", gemv_swiglu_kernel<W, false>, grid, block, 0, stream, w, x,
                     inter, K, act);
}

// ---- skinny GEMMs (2 to 8·NT rows): a block owns 16 weight rows from n0 and its warps split K

// Loads the first kInFlight chunks of weights (load(slot, j) for the warp's chunk j < mine),
// which no earlier kernel writes, then waits for the previous kernel: x and the residual in
// out are its results.
template <int kInFlight, class Load>
__device__ __forceinline__ void skinny_start(int64_t mine, Load&& load) {
#pragma unroll
  for (int u = 0; u < kInFlight; ++u)
    if (u < mine) load(u, u);
  wait_for_previous_kernel();
}

// body(u, j) for each of the warp's chunks j < mine, u = j % kInFlight its slot of weights in
// flight (a compile-time index after unrolling, so the slots stay in registers).
template <int kInFlight, class Body>
__device__ __forceinline__ void skinny_chunks(int64_t mine, Body&& body) {
  for (int64_t base = 0; base < mine; base += kInFlight) {
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t j = base + u;
      if (j >= mine) break;
      body(u, j);
    }
  }
}

// x row gid + 8t of tile t (a row past M reads row 0 and is not stored), as 16-byte vectors
// from the lane's first one.
template <int NT>
struct SkinnyX {
  const uint4* r[NT];
  bool ok[NT];
};
template <int NT>
__device__ __forceinline__ SkinnyX<NT> skinny_x_rows(const uint16_t* x, int M, int64_t K, int gid, int first) {
  SkinnyX<NT> X;
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int m = gid + 8 * t;
    X.ok[t] = m < M;
    X.r[t] = reinterpret_cast<const uint4*>(x + static_cast<int64_t>(X.ok[t] ? m : 0) * K) + first;
  }
  return X;
}

// The warps' partial tiles c[t] (weight rows n0 + gid / + 8, x rows 8t + 2·tig / + 1) added in
// warp order by the first warp (a fixed order: the result does not depend on timing), times
// `scale`, into out [M, N] (or added to it).
template <int kWarps, int NT>
__device__ __forceinline__ void skinny_epilogue(float (&part)[kWarps][NT * 4][32], const float (&c)[NT][4], int64_t n0,
                                                int M, int64_t N, float* __restrict__ out, bool accumulate,
                                                float scale) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int j = 0; j < 4; ++j) part[warp][4 * t + j][lane] = c[t][j];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float sum = 0.0f;
#pragma unroll
      for (int q = 0; q < kWarps; ++q) sum += part[q][4 * t + j][lane];
      const int m = 8 * t + 2 * tig + (j & 1);
      const int64_t n = n0 + gid + 8 * (j >> 1);
      if (m < M && n < N) {
        float* o = out + static_cast<int64_t>(m) * N + n;
        *o = accumulate ? *o + sum * scale : sum * scale;
      }
    }
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

// The tensor-core decode kernels' epilogue (fp8_gemm.cu, int4_gemm.cu): sums the kWarps warps'
// tiles c (one row tile of 16 weight rows, NT column tiles of 8 x rows) in warp order (a fixed
// order: the result does not depend on timing) through `part` (kWarps * NT * 4 * 32 floats of
// shared memory), then calls store(m, g, j, sum) for each sum of x row m and lane group g
// (weight row gid = g, or g + 8 when j >= 2), spread over the block's threads.
template <int kWarps, int NT, typename Store>
__device__ __forceinline__ void mma_tiles_reduce(float* part, const float (&c)[NT][4], Store&& store) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < NT; ++t)
#pragma unroll
    for (int j = 0; j < 4; ++j) part[(warp * NT * 4 + 4 * t + j) * 32 + lane] = c[t][j];
  __syncthreads();
  for (int e = threadIdx.x; e < NT * 4 * 32; e += kWarps * 32) {
    const int q = e / 32, l = e % 32, t = q / 4, j = q % 4;
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) sum += part[(v * NT * 4 + q) * 32 + l];
    store(8 * t + 2 * (l & 3) + (j & 1), l >> 2, j, sum);
  }
  __syncthreads();
}

}  // namespace ds::cuda::ops
