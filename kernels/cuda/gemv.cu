// Skinny GEMM for batch-1 decode: out[m, n] (+)= x[m, :] · w[n, :], bf16 operands, fp32
// accumulation. At these sizes the GEMM only streams the weight matrix, and what matters is
// keeping enough bytes in flight: one warp per output row n, each lane loading 16 bytes
// (8 weights) per step, eight steps unrolled, the M input rows read from L1/L2 alongside; a
// warp shuffle reduces the row. Many small thread blocks keep every SM busy down to the
// 32-row DeltaNet gate projections. Measured (docs/benchmarks.md): on par with cuBLAS at one
// row, far slower at eight (each warp re-reads the input rows), so it is built and used for
// one row only (the template keeps M for a later shared-memory variant).
//
// Launched as a programmatic dependent launch: its blocks are scheduled while the previous
// kernel on the stream drains, load their first weight vectors (which no earlier kernel
// writes) and only then wait (griddepcontrol.wait) for the previous kernel's results, the
// input row and the residual. That hides the launch and the first DRAM round trip behind the
// previous kernel's tail, which adds up over the ~130 GEMVs of a decode step (see
// launch_dependent in backend_common.cuh; DELTASERVE_CUDA_PDL=0 launches it plainly).
#include <cstdlib>
#include <string>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

constexpr int kWarps = 4;
constexpr int kUnroll = 8;  // 16-byte weight loads in flight per lane

__device__ __forceinline__ void bf16x8_to_f32(const uint4& v, float* f) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

template <int M>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const uint16_t* __restrict__ w, const uint16_t* __restrict__ x,
                                                           int64_t N, int64_t K, float* __restrict__ out, bool accumulate) {
  const int lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (n >= N) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w + n * K);
  const int64_t vecs = K / 8;  // 16-byte vectors per row
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  int64_t v = lane;
  uint4 wv[kUnroll];
  bool preloaded = v + 32 * (kUnroll - 1) < vecs;
  if (preloaded) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = __ldg(wr + v + 32 * u);
  }
  wait_for_previous_kernel();  // x and out are the previous kernels' results
  for (; v + 32 * (kUnroll - 1) < vecs; v += 32 * kUnroll) {
    if (!preloaded) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = __ldg(wr + v + 32 * u);
    }
    preloaded = false;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float wf[8];
      bf16x8_to_f32(wv[u], wf);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(x + m * K) + v + 32 * u), xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[m] = fmaf(wf[i], xf[i], acc[m]);
      }
    }
  }
  for (; v < vecs; v += 32) {
    float wf[8];
    bf16x8_to_f32(__ldg(wr + v), wf);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float xf[8];
      bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(x + m * K) + v), xf);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[m] = fmaf(wf[i], xf[i], acc[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float s = warp_sum(acc[m]);
    if (lane == 0) {
      float* o = out + m * N + n;
      *o = accumulate ? *o + s : s;
    }
  }
}

template <int M>
void launch(const uint16_t* w, const uint16_t* x, int64_t N, int64_t K, float* out, bool accumulate, cudaStream_t s) {
  launch_dependent("gemm (skinny) kernel", gemv_kernel<M>, dim3(grid_for(N, kWarps)), dim3(kWarps * 32), 0, s, w, x, N,
                   K, out, accumulate);
}

}  // namespace

bool gemv_supported(int64_t M, int64_t K) { return M >= 1 && M <= kGemvMaxRows && K % 8 == 0 && K > 0; }

void gemv_bf16(const uint16_t* w, const uint16_t* x, int64_t M, int64_t N, int64_t K, float* out, bool accumulate,
               void* stream) {
  auto s = as_stream(stream);
  if (M != 1) throw std::invalid_argument("cuda backend: gemv: one row only");
  launch<1>(w, x, N, K, out, accumulate, s);
  check_launch("gemm (skinny) kernel");
}

}  // namespace ds::cuda::ops
