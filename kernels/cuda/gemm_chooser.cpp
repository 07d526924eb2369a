// choose_gemm (gemm_chooser.h): the decode-sized kernels where the paths allow them and the
// shape fits, the block-scaled FP8 GEMM for larger FP8 steps, dequantised tiles for larger
// 4-bit steps, cuBLAS otherwise.
#include "kernels/cuda/gemm_chooser.h"

#include <algorithm>

#include "kernels/cuda/backend_ops.h"

namespace ds::cuda {
namespace {

GemmKernel choose_fp8(const GemmShape& s, const CudaBackendOptions::KernelPaths& paths) {
  const int64_t M = s.M, K = s.K;
  // One row: the tensor-core kernel where K allows it and the paths ask for it, else the
  // warp-per-row GEMV.
  const bool tensor_core_row = paths.fp8_tensor_core_gemv && ops::skinny_gemm_fp8_supported(1, K);
  if (paths.gemv && !tensor_core_row && ops::gemv_fp8_supported(M, K)) return GemmKernel::gemv_fp8;
  const bool tensor_cores = M == 1 ? paths.gemv : paths.skinny_gemm && M <= paths.fp8_skinny_rows;
  if (tensor_cores && ops::skinny_gemm_fp8_supported(M, K)) return GemmKernel::skinny_fp8;
  if (paths.fp8_block_gemm && M > 1 && s.block_scales && K % kBlockGemmK == 0) {
    const int64_t M4 = M / kBlockGemmRows * kBlockGemmRows, rest = M - M4;
    if (M4 > 0 && (rest == 0 || ops::skinny_gemm_fp8_supported(rest, K))) return GemmKernel::fp8_block;
  }
  return GemmKernel::fp8_dequant_tiles;
}

// Decode-sized steps read the codes (the bytes floor of a decode step: half a byte a weight
// plus its group's scale and zero); larger ones are compute-bound and run cuBLAS over
// dequantised tiles. Every int4 weight the backend keeps has a layout the kernel reads
// (ops::int4_layout_supported; the others stay bf16), so the choice needs no K.
GemmKernel choose_int4(const GemmShape& s, const CudaBackendOptions::KernelPaths& paths) {
  const bool allowed = s.M == 1 ? paths.gemv : paths.skinny_gemm;
  if (allowed && s.M <= std::min(paths.int4_skinny_rows, ops::kSkinnyInt4MaxRows)) return GemmKernel::skinny_int4;
  return GemmKernel::int4_dequant_tiles;
}

}  // namespace

const char* gemm_kernel_name(GemmKernel k) {
  switch (k) {
    case GemmKernel::cublas: return "cublas";
    case GemmKernel::gemv_bf16: return "gemv_bf16";
    case GemmKernel::skinny_bf16: return "skinny_bf16";
    case GemmKernel::gemv_fp8: return "gemv_fp8";
    case GemmKernel::skinny_fp8: return "skinny_fp8";
    case GemmKernel::fp8_block: return "fp8_block";
    case GemmKernel::fp8_dequant_tiles: return "fp8_dequant_tiles";
    case GemmKernel::skinny_int4: return "skinny_int4";
    case GemmKernel::int4_dequant_tiles: return "int4_dequant_tiles";
  }
  return "?";
}

GemmShape gemm_shape(const kernels::Tensor& x, const kernels::Tensor& w) {
  GemmShape s{.M = x.dim(0), .N = w.dim(0), .K = x.dim(1), .weight = w.dtype(), .block_scales = false};
  if (w.dtype() == DType::fp8_e4m3) s.block_scales = w.fp8_scales().row_shift == kernels::Fp8Scales::kBlockRowShift;
  return s;
}

GemmKernel choose_gemm(const GemmShape& s, const CudaBackendOptions::KernelPaths& paths) {
  if (s.weight == DType::fp8_e4m3) return choose_fp8(s, paths);
  if (s.weight == DType::int4) return choose_int4(s, paths);
  if (s.weight == DType::f32) return GemmKernel::cublas;  // the decode kernels read bf16 weights
  if (paths.gemv && ops::gemv_supported(s.M, s.K)) return GemmKernel::gemv_bf16;
  if (paths.skinny_gemm && ops::skinny_gemm_supported(s.M, s.K)) return GemmKernel::skinny_bf16;
  return GemmKernel::cublas;
}

}  // namespace ds::cuda
