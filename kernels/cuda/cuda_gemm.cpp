// GEMM of the CUDA backend: the kernel choose_gemm picks (gemm_chooser.h), run; 4-bit
// weights' kernels in cuda_gemm_int4.cpp. cuBLAS takes bf16 operands and accumulates in fp32
// into an f32 output (beta = 1 is the fused residual add); row-major [M, K] x and [N, K] W
// are column-major [K, M] and [K, N], so out (column-major [N, M]) = op_T(W) · x.
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/bias_gemm.h"
#include "kernels/cuda/cuda_gemm.h"
#include "kernels/cuda/fp8_block_gemm.h"
#include "kernels/cuda/gemm_chooser.h"

namespace ds::cuda {
namespace {

// Bf16 elements of an FP8 weight dequantised per cuBLAS call: whole weights up to this size,
// else tiles of rows (whole 128-row blocks) about this large, so the scratch stays bounded.
constexpr int64_t kFp8TileElements = int64_t{32} << 20;

// The scale layouts cuBLASLt's block-scaled FP8 GEMM reads (with the shapes it takes:
// gemm_chooser.h): the activations' VEC128_32F scales M-major, scale (m, k / 128) at
// (k / 128) * M + m; the weight's BLK128x128_32F scales row-major with rows padded to a
// multiple of 4, [N / 128][roundup(K / 128, 4)], which is the checkpoint's own layout when K is
// a multiple of kBlockGemmK.

// out (f32 or bf16, [M, N]) (+)= x · wᵀ on cuBLASLt's block-scaled FP8 GEMM, x quantised per
// row and 128 columns into scratch first. The rows past the last multiple of 4 go to the FP8
// skinny kernel (f32 out only; bf16 out needs M a multiple of 4). False, having queued no
// GEMM, where it does not apply: a weight without 128 x 128 block scales, K not a multiple of
// 512, or no cuBLASLt algorithm for the shape.
bool run_gemm_fp8_blocks(CudaContext& ctx, const CudaBackendOptions::KernelPaths& paths, const uint16_t* x,
                         const ops::Fp8Weight& fw, int64_t M, int64_t N, int64_t K, void* out, DType out_type,
                         bool accumulate) {
  const int64_t M4 = M / kBlockGemmRows * kBlockGemmRows, rest = M - M4;
  if (fw.row_shift != kernels::Fp8Scales::kBlockRowShift || K % kBlockGemmK != 0 || M4 == 0) return false;
  if (rest > 0 && (out_type != DType::f32 || !ops::skinny_gemm_fp8_supported(rest, K))) return false;
  auto& lt = ctx.fp8_block_gemm();
  constexpr auto w_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, x_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  if (!lt.available(w_mode, x_mode, M4, N, K, out_type, N, paths.fp8_decode_tiles)) return false;
  const size_t code_bytes = (static_cast<size_t>(M4 * K) + 15) / 16 * 16;
  auto* codes = static_cast<uint8_t*>(
      ctx.scratch(Scratch::fp8_activations, code_bytes + static_cast<size_t>(M4 * (K / 128)) * sizeof(float)));
  auto* scales = reinterpret_cast<float*>(codes + code_bytes);
  ops::quantize_rows_fp8(x, M4, K, codes, scales, 1, M4, ctx.stream());
  // False only on a shape's first call (then available() is false): the quantised x is unused.
  if (!lt.matmul({fw.codes, fw.scales, w_mode}, {codes, scales, x_mode}, M4, N, K, out, out_type, N, accumulate,
                 paths.fp8_decode_tiles))
    return false;
  if (rest > 0)
    ops::skinny_gemm_fp8(fw, x + M4 * K, rest, N, K, static_cast<float*>(out) + M4 * N, accumulate, ctx.stream());
  return true;
}

// out (+)= x · wᵀ for an FP8 weight and bf16 x on the chosen kernel: the decode kernels
// dequantise in registers (fp8_gemm.cu); the block-scaled FP8 GEMM falls back to cuBLAS over
// the weight dequantised to bf16, tile by tile, where cuBLASLt has no algorithm.
void run_gemm_fp8(CudaContext& ctx, const CudaBackendOptions::KernelPaths& paths, GemmKernel kernel,
                  const uint16_t* x, const kernels::Tensor& w, int64_t M, kernels::Tensor& out, bool accumulate) {
  const int64_t N = w.dim(0), K = w.dim(1);
  const auto& fs = w.fp8_scales();
  const ops::Fp8Weight fw{w.data_as<const uint8_t>(), fs.data, fs.cols, fs.row_shift};
  if (kernel == GemmKernel::gemv_fp8) {
    ops::gemv_fp8(fw, x, N, K, out.data_as<float>(), accumulate, ctx.stream());
    return;
  }
  if (kernel == GemmKernel::skinny_fp8) {
    ops::skinny_gemm_fp8(fw, x, M, N, K, out.data_as<float>(), accumulate, ctx.stream());
    return;
  }
  if (kernel == GemmKernel::fp8_block &&
      run_gemm_fp8_blocks(ctx, paths, x, fw, M, N, K, out.data(), DType::f32, accumulate))
    return;
  const int64_t block = int64_t{1} << kernels::Fp8Scales::kBlockRowShift;
  int64_t tile = N;
  if (N * K > kFp8TileElements) tile = std::max<int64_t>(block, kFp8TileElements / K / block * block);
  auto* wb = static_cast<uint16_t*>(ctx.scratch(Scratch::gemm_weight, static_cast<size_t>(std::min(tile, N) * K) * 2));
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  for (int64_t n0 = 0; n0 < N; n0 += tile) {
    const int64_t rows = std::min(tile, N - n0);
    const ops::Fp8Weight part{fw.codes + n0 * K, fw.scales + (n0 >> fw.row_shift) * fw.scale_cols, fw.scale_cols,
                              fw.row_shift};
    ops::dequantize_fp8_bf16(part, rows, K, wb, ctx.stream());
    const int m = static_cast<int>(rows), n = static_cast<int>(M), k = static_cast<int>(K);
    check_cublas(cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, wb, CUDA_R_16BF, k, x,
                              CUDA_R_16BF, k, &beta, out.data_as<float>() + n0, CUDA_R_32F, static_cast<int>(N),
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "gemm", "cublasGemmEx (fp8 weight)");
  }
}

}  // namespace

bool run_gate_up_swiglu_fp8_blocks(CudaContext& ctx, const CudaBackendOptions::KernelPaths& paths,
                                   const kernels::Tensor& x, const kernels::Tensor& w, kernels::Tensor& scratch,
                                   kernels::Tensor& out) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  if (!paths.fp8_block_gemm || M <= paths.fp8_skinny_rows || M % kBlockGemmRows != 0 || x.dtype() != DType::bf16 ||
      w.dtype() != DType::fp8_e4m3 || out.dtype() != DType::bf16 || (N / 2) % 8 != 0)
    return false;
  const auto& fs = w.fp8_scales();
  const ops::Fp8Weight fw{w.data_as<const uint8_t>(), fs.data, fs.cols, fs.row_shift};
  auto* gate_up = scratch.data_as<uint16_t>();  // bf16 [M, 2I] in the f32 scratch the contract provides
  if (!run_gemm_fp8_blocks(ctx, paths, x.data_as<const uint16_t>(), fw, M, N, K, gate_up, DType::bf16, false))
    return false;
  ops::swiglu_bf16(gate_up, M, N / 2, out.data_as<uint16_t>(), ctx.stream());
  return true;
}

void run_gemm(CudaContext& ctx, const CudaBackendOptions::KernelPaths& paths, const kernels::Tensor& x,
              const kernels::Tensor& w, kernels::Tensor& out, bool accumulate) {
  // Shapes and types are the Backend contract's (kernels/backend.cpp); only cuBLAS's int
  // dimensions are this backend's own limit.
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  if (M > 0x7fffffffLL || N > 0x7fffffffLL || K > 0x7fffffffLL)
    throw std::invalid_argument("gemm: dimension too large for cuBLAS");

  const void* xp = x.data();
  cudaDataType_t type = CUDA_R_16BF;
  if (w.dtype() != DType::f32 && x.dtype() == DType::f32) {
    auto* tmp = static_cast<uint16_t*>(ctx.scratch(Scratch::gemm_input, static_cast<size_t>(M * K) * 2));
    ops::to_bf16(x.data_as<const float>(), tmp, M * K, ctx.stream());
    xp = tmp;
  } else if (w.dtype() == DType::f32) {
    type = CUDA_R_32F;
    if (x.dtype() == DType::bf16) {
      auto* tmp = static_cast<float*>(ctx.scratch(Scratch::gemm_input, static_cast<size_t>(M * K) * 4));
      ops::bf16_to_f32(x.data_as<const uint16_t>(), tmp, M * K, ctx.stream());
      xp = tmp;
    }
  }
  const GemmKernel kernel = choose_gemm(gemm_shape(x, w), paths);
  switch (kernel) {
    case GemmKernel::gemv_fp8:
    case GemmKernel::skinny_fp8:
    case GemmKernel::fp8_block:
    case GemmKernel::fp8_dequant_tiles:
      run_gemm_fp8(ctx, paths, kernel, static_cast<const uint16_t*>(xp), w, M, out, accumulate);
      return;
    case GemmKernel::skinny_int4:
    case GemmKernel::int4_dequant_tiles:
      run_gemm_int4(ctx, kernel, static_cast<const uint16_t*>(xp), w, M, out, accumulate);
      return;
    case GemmKernel::gemv_bf16:
      ops::gemv_bf16(w.data_as<const uint16_t>(), static_cast<const uint16_t*>(xp), M, N, K, out.data_as<float>(),
                     accumulate, ctx.stream());
      return;
    case GemmKernel::skinny_bf16:
      ops::skinny_gemm_bf16(w.data_as<const uint16_t>(), static_cast<const uint16_t*>(xp), M, N, K,
                            out.data_as<float>(), accumulate, ctx.stream());
      return;
    case GemmKernel::cublas:
      break;
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  check_cublas(cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w.data(), type, k, xp, type, k,
                            &beta, out.data(), CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "gemm", "cublasGemmEx");
}

namespace {

// x as bf16: itself, or converted into the gemm_input scratch.
const uint16_t* bf16_input(CudaContext& ctx, const kernels::Tensor& x) {
  if (x.dtype() != DType::f32) return static_cast<const uint16_t*>(x.data());
  const int64_t n = x.numel();
  auto* tmp = static_cast<uint16_t*>(ctx.scratch(Scratch::gemm_input, static_cast<size_t>(n) * 2));
  ops::to_bf16(x.data_as<const float>(), tmp, n, ctx.stream());
  return tmp;
}

}  // namespace

bool run_gemm_bias(CudaContext& ctx, const CudaBackendOptions::KernelPaths& paths, const kernels::Tensor& x,
                   const kernels::Tensor& w, const kernels::Tensor& bias, kernels::Tensor& out, bool accumulate) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  if (w.dtype() != DType::bf16 || choose_gemm(gemm_shape(x, w), paths) != GemmKernel::cublas) return false;
  const uint16_t* xp = bf16_input(ctx, x);
  return ctx.bias_gemm().matmul(w.data_as<const uint16_t>(), xp, bias.data_as<const float>(), M, N, K,
                                out.data_as<float>(), accumulate);
}

bool run_gemm_bias_gelu(CudaContext& ctx, const CudaBackendOptions::KernelPaths& paths, const kernels::Tensor& x,
                        const kernels::Tensor& w, const kernels::Tensor& bias, kernels::Tensor& out) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  if (w.dtype() != DType::bf16 || choose_gemm(gemm_shape(x, w), paths) != GemmKernel::cublas) return false;
  const uint16_t* xp = bf16_input(ctx, x);
  return ctx.bias_gemm().matmul_gelu(w.data_as<const uint16_t>(), xp, bias.data_as<const float>(), M, N, K, out.data(),
                                     out.dtype() == DType::bf16);
}

bool run_gate_up_swiglu_tiled(CudaContext& ctx, const kernels::Tensor& x, const kernels::Tensor& w,
                              kernels::Tensor& scratch, kernels::Tensor& out) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  if (M <= ops::kSkinnyMaxRows || x.dtype() != DType::bf16 || w.dtype() != DType::bf16 || out.dtype() != DType::bf16 ||
      (N / 2) % 8 != 0)
    return false;
  if (M > 0x7fffffffLL || N > 0x7fffffffLL || K > 0x7fffffffLL)
    throw std::invalid_argument("gate_up_swiglu: dimension too large for cuBLAS");
  // The bf16 product fits in the f32 scratch the contract provides ([M, 2I] f32).
  auto* gate_up = scratch.data_as<uint16_t>();
  const float alpha = 1.0f, beta = 0.0f;
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  check_cublas(cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w.data(), CUDA_R_16BF, k, x.data(),
                            CUDA_R_16BF, k, &beta, gate_up, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "gate_up_swiglu", "cublasGemmEx (bf16 out)");
  ops::swiglu_bf16(gate_up, M, N / 2, out.data_as<uint16_t>(), ctx.stream());
  return true;
}

}  // namespace ds::cuda
