// Skinny GEMM for batch-1 decode: out[m, n] (+)= x[m, :] · w[n, :], bf16 operands, fp32
// accumulation. At these sizes the GEMM only streams the weight matrix, and what matters is
// keeping enough bytes in flight: one warp per output row n, each lane loading 16 bytes
// (8 weights) per step, eight steps unrolled, the M input rows read from L1/L2 alongside; a
// warp shuffle reduces the row. Many small thread blocks keep every SM busy down to the
// 32-row DeltaNet gate projections. Measured (docs/benchmarks.md): on par with cuBLAS at one
// row, far slower at eight (each warp re-reads the input rows), so it is built and used for
// one row only.
//
// The SwiGLU variant computes the MLP's gate and up rows (n and n + I of the stacked
// [gate; up] weight) in the same warp and writes silu(gate) * up straight into the
// activation the down projection reads: one kernel and one f32 round trip fewer per layer.
//
// Launched as a programmatic dependent launch: its blocks are scheduled while the previous
// kernel on the stream drains, load their first weight vectors (which no earlier kernel
// writes) and only then wait (griddepcontrol.wait) for the previous kernel's results, the
// input row and the residual. That hides the launch and the first DRAM round trip behind the
// previous kernel's tail, which adds up over the ~130 GEMVs of a decode step (see
// launch_dependent in backend_common.cuh; an unchained ops::Stream launches it plainly).
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/decode_gemm.cuh"

namespace ds::cuda::ops {
namespace {

constexpr int kWarps = 4;  // warps per block, one output row (or row pair) per warp
constexpr int kLoads = 8;  // 16-byte weight loads in flight per lane

// out[n] (+)= w[n, :] · x, one warp per n. (4 warps x 8 loads x 1 row per warp: measured
// against 16 loads per lane, 8 warps per block and 2 rows per warp on the 9B decode step,
// docs/benchmarks.md; none was faster.)
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const uint16_t* __restrict__ w, const uint16_t* __restrict__ x,
                                                           int64_t N, int64_t K, float* __restrict__ out, bool accumulate) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (n >= N) return;
  const Bf16Row rows[1] = {{reinterpret_cast<const uint4*>(w + n * K)}};
  const bool lead = (threadIdx.x & 31) == 0;
  float prev = 0.0f;
  float s[1];
  // The residual is read right after the wait, so its round trip overlaps the dot products.
  warp_dots<kLoads>(rows, x, K, s, [&] {
    if (accumulate && lead) prev = out[n];
  });
  if (lead) out[n] = prev + s[0];
}

// act[i] = silu(w[i, :] · x) * (w[I + i, :] · x), one warp per i; act f32 or bf16.
template <bool kBf16Out>
__global__ void __launch_bounds__(kWarps * 32) gemv_swiglu_kernel(const uint16_t* __restrict__ w,
                                                                  const uint16_t* __restrict__ x, int64_t inter,
                                                                  int64_t K, void* __restrict__ act) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (i >= inter) return;
  const Bf16Row rows[2] = {{reinterpret_cast<const uint4*>(w + i * K)}, {reinterpret_cast<const uint4*>(w + (inter + i) * K)}};
  float s[2];
  warp_dots<kLoads>(rows, x, K, s, [] {});
  if ((threadIdx.x & 31) == 0) store_act<kBf16Out>(act, i, silu_f(s[0]) * s[1]);
}

}  // namespace

bool gemv_supported(int64_t M, int64_t K) { return M >= 1 && M <= kGemvMaxRows && K % 8 == 0 && K > 0; }

void gemv_bf16(const uint16_t* w, const uint16_t* x, int64_t M, int64_t N, int64_t K, float* out, bool accumulate,
               Stream stream) {
  if (M != 1) throw std::invalid_argument("cuda backend: gemv: one row only");
  launch_dependent("gemm (skinny) kernel", gemv_kernel, dim3(grid_for(N, kWarps)), dim3(kWarps * 32), 0,
                   stream, w, x, N, K, out, accumulate);
}

void gemv_swiglu_bf16(const uint16_t* w, const uint16_t* x, int64_t inter, int64_t K, void* act, DType act_type,
                      Stream stream) {
  if (inter == 0) return;
  const dim3 grid(grid_for(inter, kWarps)), block(kWarps * 32);
  if (act_type == DType::bf16)
    launch_dependent("gate_up + swiglu (skinny) kernel", gemv_swiglu_kernel<true>, grid, block, 0, stream, w,
                     x, inter, K, act);
  else
    launch_dependent("gate_up + swiglu (skinny) kernel", gemv_swiglu_kernel<false>, grid, block, 0, stream,
                     w, x, inter, K, act);
}

}  // namespace ds::cuda::ops
