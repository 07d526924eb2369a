// What bench_fp8_gemm's table, --algos and --search share: the block-scaled GEMM's descriptor
// as Fp8BlockGemm makes it, a cuBLASLt configuration as one line, and the median time of a
// queued call, optionally with the L2 flushed before each timed repetition (a decode step
// never finds its weights in the L2; a 4096 x 4096 FP8 weight fits in it).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace ds::bench {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// "TN", f32 compute, each operand's scale mode. Returns the first failure.
inline cublasStatus_t block_scaled_desc(cublasLtMatmulDesc_t* desc, cublasLtMatmulMatrixScale_t amode,
                                        cublasLtMatmulMatrixScale_t bmode) {
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasStatus_t s = cublasLtMatmulDescCreate(desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &amode, sizeof amode);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulDescSetAttribute(*desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bmode, sizeof bmode);
  return s;
}

// Algorithm id, tile, stages, split-K, reduction scheme, CTA swizzle and cluster shape (the
// cublasLt.h enum values).
inline std::string describe_algo(const cublasLtMatmulAlgo_t& algo) {
  int32_t id = 0, splitk = 1;
  uint32_t tile = 0, stages = 0, reduction = 0, swizzle = 0;
  uint16_t cluster = 0;
  size_t got = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &got);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &got);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &got);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &got);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction, sizeof reduction,
                                       &got);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof swizzle, &got);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &got);
  return "id " + std::to_string(id) + " tile " + std::to_string(tile) + " stages " + std::to_string(stages) +
         " splitk " + std::to_string(splitk) + " red " + std::to_string(reduction) + " swz " + std::to_string(swizzle) +
         " cluster " + std::to_string(cluster);
}

// A device buffer larger than the L2 (allocated on first use), for median_us's flush.
inline constexpr size_t kL2FlushBytes = size_t{256} << 20;
inline void* l2_flush_buffer() {
  static void* p = [] {
    void* b = nullptr;
    check_cuda(cudaMalloc(&b, kL2FlushBytes), "L2 flush buffer");
    return b;
  }();
  return p;
}

// Median of `reps` timed runs of f (queued on stream) after three untimed ones, in us; with
// flush_l2, l2_flush_buffer() is rewritten before each timed run (outside the timing).
template <typename F>
double median_us(cudaStream_t stream, int reps, F&& f, bool flush_l2) {
  cudaEvent_t a, b;
  check_cuda(cudaEventCreate(&a), "event");
  check_cuda(cudaEventCreate(&b), "event");
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    if (flush_l2) check_cuda(cudaMemsetAsync(l2_flush_buffer(), i & 0xff, kL2FlushBytes, stream), "flush");
    check_cuda(cudaEventRecord(a, stream), "record");
    f();
    check_cuda(cudaEventRecord(b, stream), "record");
    check_cuda(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, a, b), "elapsed");
    t.push_back(ms * 1e3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace ds::bench
