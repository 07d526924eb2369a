// GemmTuner: the cuBLASLt algorithm for each prefill-sized GEMM shape, chosen by timing the
// candidates cuBLASLt's heuristic offers (and cublasGemmEx's own choice) once per shape bucket.
//
// cublasGemmEx runs the heuristic's first pick; at the 9B's prefill shapes another candidate
// is up to ~8% faster (bench_prefill_gemm; docs/benchmarks.md, "Prefill small kernels"). The
// tuner times each candidate on the call's own operands, writing the call's own output (so it
// only takes GEMMs that overwrite their output: beta = 0), and keeps the fastest for the
// bucket: the same N, K and output type with M in the same power-of-two range. Later calls of
// the bucket run that algorithm where cuBLASLt accepts it for their M, else cublasGemmEx.
// Tuning synchronises the stream once per bucket (a few to a few hundred milliseconds the
// first time a prompt of that size arrives); steps below kMinRows rows are never tuned.
//
// Internal to kernels/cuda. Not thread-safe (one per CudaContext).
#pragma once

#include <cublasLt.h>
#include <library_types.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "kernels/cuda/cuda_context.h"

namespace ds::cuda {

class GemmTuner {
 public:
  static constexpr int64_t kMinRows = 1024;
  static constexpr int kCandidates = 8;

  explicit GemmTuner(CudaContext& ctx);
  ~GemmTuner();
  GemmTuner(const GemmTuner&) = delete;
  GemmTuner& operator=(const GemmTuner&) = delete;

  // out (row-major [M, N], out_type f32 or bf16) = x [M, K] · w [N, K]ᵀ, bf16 operands, fp32
  // accumulation, beta = 0. Runs cublasGemmEx itself where the bucket's best is its choice.
  // Returns false (nothing queued) for M < kMinRows.
  bool run(const void* w, const void* x, int64_t M, int64_t N, int64_t K, void* out, cudaDataType_t out_type);

 private:
  struct Choice {
    bool lt = false;  // false: cublasGemmEx
    cublasLtMatmulAlgo_t algo{};
  };
  struct Problem;
  Choice tune(const Problem& p);
  void run_choice(const Problem& p, const Choice& c);

  CudaContext& ctx_;
  cublasLtHandle_t lt_ = nullptr;
  std::map<std::tuple<int, int64_t, int64_t, int>, Choice> chosen_;  // (log2 M bucket, N, K, out type)
};

}  // namespace ds::cuda
