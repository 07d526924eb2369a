// GEMMs over 4-bit weights (cuda_gemm.h) on the kernel choose_gemm picks (gemm_chooser.h).
//
// skinny_int4, decode-sized steps: int4_gemm.cu reads the codes directly (half a byte a
// weight plus 5 bytes a group, the bytes floor of a decode step). int4_dequant_tiles, larger
// steps, which are compute-bound: cuBLAS's bf16 GEMM over the weight dequantised into
// scratch, a tile of rows at a time, each tile small enough to stay in the L2 between the
// dequantising kernel that writes it and the GEMM that reads it.
#include <algorithm>
#include <stdexcept>

#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_gemm.h"

namespace ds::cuda {
namespace {

// Bf16 elements of a dequantised tile: 8 Mi elements (16 MiB), a third of the H100's and
// H200's 50 MB L2.
constexpr int64_t kInt4TileElements = int64_t{8} << 20;

ops::Int4Weight device_weight(const kernels::Tensor& w) {
  const auto& g = w.int4_groups();
  return {w.data_as<const uint8_t>(), g.scales, g.zeros, g.group_size, g.perm};
}

// Rows [n0, n0 + rows) of w.
ops::Int4Weight rows_of(const ops::Int4Weight& w, int64_t n0, int64_t K) {
  const int64_t groups = K / w.group_size;
  return {w.codes + n0 * (K / 2), w.scales + n0 * groups, w.zeros + n0 * groups, w.group_size, w.perm};
}

// out (column-major [N, M] with leading dimension N, f32 or bf16) (+)= the tiles of w times x,
// through cuBLAS.
void gemm_tiles(CudaContext& ctx, const uint16_t* x, const ops::Int4Weight& w, int64_t M, int64_t N, int64_t K,
                void* out, cudaDataType_t out_type, bool accumulate) {
  if (M > 0x7fffffffLL || N > 0x7fffffffLL || K > 0x7fffffffLL)
    throw std::invalid_argument("gemm: dimension too large for cuBLAS");
  const int64_t tile = std::min(N, std::max<int64_t>(128, kInt4TileElements / K / 128 * 128));
  auto* wb = static_cast<uint16_t*>(ctx.scratch(Scratch::gemm_weight, static_cast<size_t>(tile * K) * 2));
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const size_t out_size = out_type == CUDA_R_32F ? 4 : 2;
  for (int64_t n0 = 0; n0 < N; n0 += tile) {
    const int64_t rows = std::min(tile, N - n0);
    ops::dequantize_int4_bf16(rows_of(w, n0, K), rows, K, wb, ctx.stream());
    const int m = static_cast<int>(rows), n = static_cast<int>(M), k = static_cast<int>(K);
    check_cublas(cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, wb, CUDA_R_16BF, k, x,
                              CUDA_R_16BF, k, &beta, static_cast<char*>(out) + n0 * out_size, out_type,
                              static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "gemm", "cublasGemmEx (int4 weight)");
  }
}

}  // namespace

void run_gemm_int4(CudaContext& ctx, GemmKernel kernel, const uint16_t* x, const kernels::Tensor& w, int64_t M,
                   kernels::Tensor& out, bool accumulate) {
  const int64_t N = w.dim(0), K = w.dim(1);
  const ops::Int4Weight dw = device_weight(w);
  if (kernel == GemmKernel::skinny_int4) {
    ops::skinny_gemm_int4(dw, x, M, N, K, out.data_as<float>(), accumulate, ctx.stream());
    return;
  }
  gemm_tiles(ctx, x, dw, M, N, K, out.data(), CUDA_R_32F, accumulate);
}

bool run_gate_up_swiglu_int4(CudaContext& ctx, GemmKernel kernel, const kernels::Tensor& x, const kernels::Tensor& w,
                             kernels::Tensor& scratch, kernels::Tensor& out) {
  const int64_t M = x.dim(0), K = x.dim(1), N = w.dim(0);
  if (w.dtype() != DType::int4 || x.dtype() != DType::bf16) return false;
  const ops::Int4Weight dw = device_weight(w);
  if (kernel == GemmKernel::skinny_int4 && M == 1) {
    ops::skinny_swiglu_int4(dw, x.data_as<const uint16_t>(), N / 2, K, out.data(), out.dtype(), ctx.stream());
    return true;
  }
  if (kernel != GemmKernel::int4_dequant_tiles || out.dtype() != DType::bf16 || (N / 2) % 8 != 0) return false;
  // The bf16 product fits in the f32 scratch the contract provides ([M, 2I] f32).
  auto* gate_up = scratch.data_as<uint16_t>();
  gemm_tiles(ctx, x.data_as<const uint16_t>(), dw, M, N, K, gate_up, CUDA_R_16BF, false);
  ops::swiglu_bf16(gate_up, M, N / 2, out.data_as<uint16_t>(), ctx.stream());
  return true;
}

}  // namespace ds::cuda
