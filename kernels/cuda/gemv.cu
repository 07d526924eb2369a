// Skinny GEMM for batch-1 decode: out[m, n] (+)= x[m, :] · w[n, :], bf16 operands, fp32
// accumulation. At these sizes the GEMM only streams the weight matrix, and what matters is
// keeping enough bytes in flight: one warp per output row n, each lane loading 16 bytes
// (8 weights) per step, eight steps unrolled, the M input rows read from L1/L2 alongside; a
// warp shuffle reduces the row. Many small thread blocks keep every SM busy down to the
// 32-row DeltaNet gate projections. Measured (docs/bench-log): on par with cuBLAS at one
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
//
// The kernels themselves are in decode_gemm.cuh, over a row reader: this file gives them bf16
// weight rows, fp8_gemm.cu FP8 codes with their block scales.
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/decode_gemm.cuh"

namespace ds::cuda::ops {
namespace {

// A bf16 weight [N, K] as gemv_kernel reads it.
struct Bf16Weight {
  const uint16_t* w;
  __device__ __forceinline__ Bf16Row row(int64_t n, int64_t K) const { return {reinterpret_cast<const uint4*>(w + n * K)}; }
};

}  // namespace

bool gemv_supported(int64_t M, int64_t K) { return M >= 1 && M <= kGemvMaxRows && K % 8 == 0 && K > 0; }

void gemv_bf16(const uint16_t* w, const uint16_t* x, int64_t M, int64_t N, int64_t K, float* out, bool accumulate,
               Stream stream) {
  if (M != 1) throw std::invalid_argument("cuda backend: gemv: one row only");
  launch_dependent("gemm (skinny) kernel", gemv_kernel<Bf16Weight>, dim3(grid_for(N, kGemvWarps)),
                   dim3(kGemvWarps * 32), 0, stream, Bf16Weight{w}, x, N, K, out, accumulate);
}

void gemv_swiglu_bf16(const uint16_t* w, const uint16_t* x, int64_t inter, int64_t K, void* act, DType act_type,
                      Stream stream) {
  launch_gemv_swiglu(Bf16Weight{w}, x, inter, K, act, act_type, stream);
}

}  // namespace ds::cuda::ops
