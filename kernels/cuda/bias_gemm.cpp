// cuBLASLt's bf16 GEMM with the bias epilogue (bias_gemm.h). Row-major [N, K] w and [M, K] x
// are column-major K x N and K x M, so out (column-major N x M, i.e. row-major [M, N]) =
// op_T(w) · x, and the epilogue's bias runs along out's N rows (one value per output feature).
// With beta = 1 the epilogue computes alpha · op_T(w) · x + beta · out + bias: the residual add
// and the bias in one pass.
#include "kernels/cuda/bias_gemm.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda/lt_plan.h"

namespace ds::cuda {
namespace {

constexpr const char* kWho = "bias gemm";
void check_lt(cublasStatus_t st, const char* what) { ds::cuda::check_lt(st, kWho, what); }

}  // namespace

struct BiasGemm::Plan : LtPlan {};

BiasGemm::BiasGemm(cudaStream_t stream, void* workspace, size_t workspace_bytes)
    : stream_(stream), workspace_(workspace), workspace_bytes_(workspace_bytes) {
  check_lt(cublasLtCreate(&lt_), "cublasLtCreate");
}

BiasGemm::~BiasGemm() {
  plans_.clear();
  if (lt_) cublasLtDestroy(lt_);
}

BiasGemm::Plan* BiasGemm::plan_for(const Key& key, const float* bias) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  const auto [M, N, K, gelu, out_bf16] = key;
  Plan* p = plans_.emplace(key, std::make_unique<Plan>()).first->second.get();
  check_lt(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  const cudaDataType_t bias_type = CUDA_R_32F;
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "set transa");
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "set transb");
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
           "set epilogue");
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type),
           "set bias type");
  // The heuristic sees the bias pointer of the first call (its alignment can matter).
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
           "set bias");
  check_lt(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, static_cast<uint64_t>(K), static_cast<uint64_t>(N), K),
           "layout of w");
  check_lt(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, static_cast<uint64_t>(K), static_cast<uint64_t>(M), K),
           "layout of x");
  check_lt(cublasLtMatrixLayoutCreate(&p->d, out_bf16 ? CUDA_R_16BF : CUDA_R_32F, static_cast<uint64_t>(N),
                                      static_cast<uint64_t>(M), N),
           "layout of out");
  cublasLtMatmulHeuristicResult_t result;
  p->usable = lt_heuristic_algo(lt_, p->desc, p->a, p->b, p->d, workspace_bytes_, kWho, result);
  if (p->usable) p->algo = result.algo;
  return p;
}

bool BiasGemm::matmul(const uint16_t* w, const uint16_t* x, const float* bias, int64_t M, int64_t N, int64_t K,
                      float* out, bool accumulate) {
  if (M <= 0 || N <= 0) return true;
  return run(Key{M, N, K, false, false}, w, x, bias, out, accumulate ? 1.0f : 0.0f);
}

bool BiasGemm::matmul_gelu(const uint16_t* w, const uint16_t* x, const float* bias, int64_t M, int64_t N, int64_t K,
                           void* out, bool out_bf16) {
  if (M <= 0 || N <= 0) return true;
  return run(Key{M, N, K, true, out_bf16}, w, x, bias, out, 0.0f);
}

bool BiasGemm::run(const Key& key, const uint16_t* w, const uint16_t* x, const float* bias, void* out, float beta) {
  Plan* p = plan_for(key, bias);
  if (!p->usable) return false;
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
           "set bias");
  const float alpha = 1.0f;
  const cublasStatus_t st = cublasLtMatmul(lt_, p->desc, &alpha, w, p->a, x, p->b, &beta, out, p->d, out, p->d,
                                           &p->algo, workspace_, workspace_bytes_, stream_);
  // Refused at the call although the heuristic offered an algorithm: never again for this shape.
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
    p->usable = false;
    return false;
  }
  check_lt(st, "cublasLtMatmul");
  return true;
}

}  // namespace ds::cuda
