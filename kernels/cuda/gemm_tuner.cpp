// GemmTuner: timed choice of the cuBLASLt algorithm per prefill GEMM shape bucket.
#include "kernels/cuda/gemm_tuner.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace ds::cuda {

// One call's cuBLASLt description (column-major: out [N, M] = op_T(W [K, N]) · x [K, M]).
struct GemmTuner::Problem {
  const void* w;
  const void* x;
  void* out;
  int64_t M, N, K;
  cudaDataType_t out_type;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;

  Problem(const void* w_, const void* x_, void* out_, int64_t m, int64_t n, int64_t k, cudaDataType_t t)
      : w(w_), x(x_), out(out_), M(m), N(n), K(k), out_type(t) {
    check_cublas(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "gemm", "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "gemm", "transa");
    check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "gemm", "transb");
    check_cublas(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, static_cast<uint64_t>(K), static_cast<uint64_t>(N), K),
                 "gemm", "layout");
    check_cublas(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, static_cast<uint64_t>(K), static_cast<uint64_t>(M), K),
                 "gemm", "layout");
    check_cublas(cublasLtMatrixLayoutCreate(&lc, out_type, static_cast<uint64_t>(N), static_cast<uint64_t>(M), N),
                 "gemm", "layout");
  }
  ~Problem() {
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
  }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;
};

GemmTuner::GemmTuner(CudaContext& ctx) : ctx_(ctx) { check_cublas(cublasLtCreate(&lt_), "init", "cublasLtCreate"); }

GemmTuner::~GemmTuner() {
  if (lt_) cublasLtDestroy(lt_);
}

void GemmTuner::run_choice(const Problem& p, const Choice& c) {
  const float alpha = 1.0f, beta = 0.0f;
  if (c.lt) {
    check_cublas(cublasLtMatmul(lt_, p.op, &alpha, p.w, p.la, p.x, p.lb, &beta, p.out, p.lc, p.out, p.lc, &c.algo,
                                ctx_.cublas_workspace(), ctx_.cublas_workspace_bytes(), ctx_.stream()),
                 "gemm", "cublasLtMatmul");
    return;
  }
  const int m = static_cast<int>(p.N), n = static_cast<int>(p.M), k = static_cast<int>(p.K);
  check_cublas(cublasGemmEx(ctx_.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, p.w, CUDA_R_16BF, k, p.x,
                            CUDA_R_16BF, k, &beta, p.out, p.out_type, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "gemm", "cublasGemmEx");
}

GemmTuner::Choice GemmTuner::tune(const Problem& p) {
  cublasLtMatmulPreference_t pref;
  check_cublas(cublasLtMatmulPreferenceCreate(&pref), "gemm", "cublasLtMatmulPreferenceCreate");
  const size_t ws = ctx_.cublas_workspace_bytes();
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  std::vector<cublasLtMatmulHeuristicResult_t> res(kCandidates);
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.la, p.lb, p.lc, p.lc, pref, kCandidates, res.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  std::vector<Choice> cands{Choice{}};  // cublasGemmEx first: a tie keeps it
  if (st == CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < found; ++i)
      if (res[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS) cands.push_back({true, res[static_cast<size_t>(i)].algo});
  if (cands.size() == 1) return cands[0];
  cudaEvent_t e0, e1;
  ops::check_cuda(cudaEventCreate(&e0), "gemm tuner: cudaEventCreate");
  ops::check_cuda(cudaEventCreate(&e1), "gemm tuner: cudaEventCreate");
  size_t best = 0;
  float best_ms = 0;
  constexpr int kRuns = 3;
  for (size_t i = 0; i < cands.size(); ++i) {
    run_choice(p, cands[i]);  // warm-up
    ops::check_cuda(cudaEventRecord(e0, ctx_.stream()), "gemm tuner: cudaEventRecord");
    for (int r = 0; r < kRuns; ++r) run_choice(p, cands[i]);
    ops::check_cuda(cudaEventRecord(e1, ctx_.stream()), "gemm tuner: cudaEventRecord");
    ops::check_cuda(cudaEventSynchronize(e1), "gemm tuner: cudaEventSynchronize (a GEMM failed)");
    float ms = 0;
    ops::check_cuda(cudaEventElapsedTime(&ms, e0, e1), "gemm tuner: cudaEventElapsedTime");
    if (i == 0 || ms < best_ms) best = i, best_ms = ms;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return cands[best];
}

bool GemmTuner::run(const void* w, const void* x, int64_t M, int64_t N, int64_t K, void* out,
                    cudaDataType_t out_type) {
  if (M < kMinRows) return false;
  int bucket = 0;
  while ((int64_t{1} << (bucket + 1)) <= M) ++bucket;
  const auto key = std::make_tuple(bucket, N, K, static_cast<int>(out_type));
  const Problem p(w, x, out, M, N, K, out_type);
  auto it = chosen_.find(key);
  if (it == chosen_.end()) it = chosen_.emplace(key, tune(p)).first;
  Choice c = it->second;
  if (c.lt) {
    cublasLtMatmulHeuristicResult_t check{};
    if (cublasLtMatmulAlgoCheck(lt_, p.op, p.la, p.lb, p.lc, p.lc, &c.algo, &check) != CUBLAS_STATUS_SUCCESS ||
        check.workspaceSize > ctx_.cublas_workspace_bytes())
      c = Choice{};
  }
  run_choice(p, c);  // after tuning this also leaves the output the caller asked for
  return true;
}

}  // namespace ds::cuda
