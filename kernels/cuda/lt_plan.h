// What the cuBLASLt GEMM plans (bias_gemm.cpp, fp8_block_gemm.cpp) share: their status check,
// a plan's handles and the heuristic query that picks its algorithm once per shape.
//
// Internal to kernels/cuda.
#pragma once

#include <cublasLt.h>

#include <stdexcept>
#include <string>

namespace ds::cuda {

// who: the GEMM, for the message ("cuda backend: <who>: <what> failed: <status>").
inline void check_lt(cublasStatus_t st, const char* who, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuda backend: ") + who + ": " + what + " failed: " +
                             cublasGetStatusString(st));
}

// One shape's cuBLASLt plan: its descriptor, the layouts of A, B and D (D also as C) and the
// algorithm; `usable` is false where cuBLASLt has none (the caller falls back). Owns the handles.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool usable = false;
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// The heuristic's first algorithm for desc over layouts a, b and d (d also as c), within
// workspace_bytes. False where cuBLASLt has none for the shape, types or scale modes on this
// device and library (NOT_SUPPORTED / INVALID_VALUE: the caller falls back); throws on any
// other failure.
inline bool lt_heuristic_algo(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t d, size_t workspace_bytes,
                              const char* who, cublasLtMatmulHeuristicResult_t& result) {
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), who, "cublasLtMatmulPreferenceCreate");
  const cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                  &workspace_bytes, sizeof workspace_bytes);
  if (set != CUBLAS_STATUS_SUCCESS) cublasLtMatmulPreferenceDestroy(pref);
  check_lt(set, who, "set workspace");
  result = {};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, d, d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_INVALID_VALUE) check_lt(st, who, "cublasLtMatmulAlgoGetHeuristic");
  return st == CUBLAS_STATUS_SUCCESS && found > 0;
}

}  // namespace ds::cuda
