// GEMM of the CUDA backend: x · Wᵀ through cuBLAS with bf16 operands and fp32 accumulation
// into an f32 output (beta = 1 is the fused residual add). Row-major [M, K] x and [N, K] W
// are column-major [K, M] and [K, N], so out (column-major [N, M]) = op_T(W) · x.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/cuda_gemm.h"

namespace ds::cuda {

void run_gemm(CudaContext& ctx, const CudaBackendOptions::KernelPaths& paths, const kernels::Tensor& x,
              const kernels::Tensor& w, kernels::Tensor& out, bool accumulate) {
  // Shapes and types are the Backend contract's (kernels/backend.cpp); only cuBLAS's int
  // dimensions are this backend's own limit.
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  if (M > 0x7fffffffLL || N > 0x7fffffffLL || K > 0x7fffffffLL)
    throw std::invalid_argument("gemm: dimension too large for cuBLAS");

  const void* xp = x.data();
  cudaDataType_t type = CUDA_R_16BF;
  if (w.dtype() == DType::bf16 && x.dtype() == DType::f32) {
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
  // Decode shapes: the weight-streaming kernel (gemv.cu) instead of cuBLAS.
  if (paths.gemv && type == CUDA_R_16BF && ops::gemv_supported(M, K)) {
    ops::gemv_bf16(w.data_as<const uint16_t>(), static_cast<const uint16_t*>(xp), M, N, K, out.data_as<float>(),
                   accumulate, ctx.stream());
    return;
  }
  if (paths.skinny_gemm && type == CUDA_R_16BF && ops::skinny_gemm_supported(M, K)) {
    ops::skinny_gemm_bf16(w.data_as<const uint16_t>(), static_cast<const uint16_t*>(xp), M, N, K,
                          out.data_as<float>(), accumulate, ctx.stream());
    return;
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  check_cublas(cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w.data(), type, k, xp, type, k,
                            &beta, out.data(), CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "gemm", "cublasGemmEx");
}

}  // namespace ds::cuda
