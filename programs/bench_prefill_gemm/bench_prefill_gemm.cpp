// bench_prefill_gemm: each GEMM shape of a 9B prefill step (M tokens; out = x · Wᵀ with bf16
// operands and fp32 accumulation) through cublasGemmEx as kernels/cuda/cuda_gemm.cpp calls it,
// and through each of the algorithms cuBLASLt's heuristic returns for the same problem, as
//   shape, default ms, TFLOP/s, fraction of the GEMM rate, best candidate ms, its index, ratio
// where the rate is cuBLAS's on an 8192^3 GEMM measured in the same run (device_ceilings.h).
// It answers whether a per-shape algorithm choice is worth having (docs/bench-log,
// "Prefill small kernels").
//   bench_prefill_gemm [--tokens 4096] [--candidates 16] [--iters 20]
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/half.h"
#include "programs/bench_cuda_model/bench_util.h"
#include "programs/bench_cuda_model/device_ceilings.h"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check_blas(int status, const char* what) {
  if (status != 0) throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(status));
}

struct Shape {
  const char* name;
  int64_t n, k;
  bool bf16_out;    // the gate/up projection's bf16 product
  bool accumulate;  // beta = 1 (the residual add)
  int calls;        // per 9B prefill step (24 DeltaNet and 8 attention layers)
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The 9B's prefill GEMM shapes: cuBLAS's default against cuBLASLt's heuristic candidates."};
  int64_t M = 4096;
  int candidates = 16, iters = 20;
  app.add_option("--tokens", M, "rows (prompt tokens)");
  app.add_option("--candidates", candidates, "algorithms asked of the heuristic");
  app.add_option("--iters", iters, "timed runs per point (median)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const std::vector<Shape> shapes = {
      {"gate_up 24576x4096 (bf16 out)", 24576, 4096, true, false, 32},
      {"down 4096x12288 (+=)", 4096, 12288, false, true, 32},
      {"q_proj / in_proj 8192x4096", 8192, 4096, false, false, 32},
      {"z 4096x4096", 4096, 4096, false, false, 24},
      {"o_proj / out_proj 4096x4096 (+=)", 4096, 4096, false, true, 32},
      {"k, v 1024x4096", 1024, 4096, false, false, 16},
  };
  try {
    const auto ceil = ds::cuda::measure_device_ceilings();
    std::printf("%s, %d SMs, bf16 GEMM %.0f TFLOP/s; M = %lld\n", ceil.gpu.c_str(), ceil.sm_count,
                ceil.bf16_flops / 1e12, static_cast<long long>(M));
    cudaStream_t stream;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    cublasHandle_t blas;
    check_blas(cublasCreate(&blas), "cublasCreate");
    check_blas(cublasSetStream(blas, stream), "cublasSetStream");
    cublasLtHandle_t lt;
    check_blas(cublasLtCreate(&lt), "cublasLtCreate");
    const size_t ws_bytes = size_t{64} << 20;
    void *ws, *w, *x, *out;
    int64_t max_n = 0, max_k = 0;
    for (const auto& s : shapes) max_n = std::max(max_n, s.n), max_k = std::max(max_k, s.k);
    check(cudaMalloc(&ws, ws_bytes), "cudaMalloc");
    check(cudaMalloc(&w, static_cast<size_t>(max_n * max_k) * 2), "cudaMalloc");
    check(cudaMalloc(&x, static_cast<size_t>(M * max_k) * 2), "cudaMalloc");
    check(cudaMalloc(&out, static_cast<size_t>(M * max_n) * 4), "cudaMalloc");
    // Random operands (uniform in +-1/16 as bf16): constant ones toggle fewer bits and run the
    // tensor cores at a higher clock than a model's data does.
    {
      std::vector<uint16_t> r(size_t{1} << 22);
      std::mt19937 rng(7);
      std::uniform_real_distribution<float> u(-0.0625f, 0.0625f);
      for (auto& v : r) v = ds::f32_to_bf16(u(rng));
      auto fill = [&](void* p, size_t n) {
        for (size_t i = 0; i < n; i += r.size())
          check(cudaMemcpy(static_cast<uint16_t*>(p) + i, r.data(), std::min(r.size(), n - i) * 2, cudaMemcpyHostToDevice),
                "cudaMemcpy");
      };
      fill(w, static_cast<size_t>(max_n * max_k));
      fill(x, static_cast<size_t>(M * max_k));
      check(cudaMemset(out, 0, static_cast<size_t>(M * max_n) * 4), "memset");
    }
    std::printf("| shape | cublasGemmEx ms | TFLOP/s | of GEMM rate | best Lt candidate ms | candidate | default / best |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
    double total_default = 0, total_best = 0;
    for (const auto& s : shapes) {
      const int m = static_cast<int>(s.n), n = static_cast<int>(M), k = static_cast<int>(s.k);
      const float alpha = 1.0f, beta = s.accumulate ? 1.0f : 0.0f;
      const cudaDataType_t ct = s.bf16_out ? CUDA_R_16BF : CUDA_R_32F;
      const double def = ds::bench::median_ms(stream, iters, [] {}, [&] {
        check_blas(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w, CUDA_R_16BF, k, x, CUDA_R_16BF, k,
                                &beta, out, ct, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
      });
      // The same problem through cuBLASLt: each heuristic candidate timed.
      cublasLtMatmulDesc_t op;
      check_blas(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      check_blas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
      check_blas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
      cublasLtMatrixLayout_t la, lb, lc;
      check_blas(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, k), "layout a");
      check_blas(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k), "layout b");
      check_blas(cublasLtMatrixLayoutCreate(&lc, ct, m, n, m), "layout c");
      cublasLtMatmulPreference_t pref;
      check_blas(cublasLtMatmulPreferenceCreate(&pref), "pref");
      check_blas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                      sizeof ws_bytes),
                 "pref ws");
      std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(candidates));
      int found = 0;
      check_blas(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, candidates, res.data(), &found),
                 "heuristic");
      double best = 1e30;
      int best_i = -1;
      for (int i = 0; i < found; ++i) {
        if (res[static_cast<size_t>(i)].state != CUBLAS_STATUS_SUCCESS) continue;
        const double t = ds::bench::median_ms(stream, iters, [] {}, [&] {
          check_blas(cublasLtMatmul(lt, op, &alpha, w, la, x, lb, &beta, out, lc, out, lc,
                                    &res[static_cast<size_t>(i)].algo, ws, ws_bytes, stream),
                     "cublasLtMatmul");
        });
        if (t < best) best = t, best_i = i;
      }
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(op);
      const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(s.n) * static_cast<double>(s.k);
      std::printf("| %s | %.3f | %.0f | %.2f | %.3f | %d of %d | %.3f |\n", s.name, def, flops / def / 1e9,
                  flops / def / 1e-3 / ceil.bf16_flops, best, best_i, found, def / best);
      total_default += s.calls * def;
      total_best += s.calls * std::min(def, best);
    }
    std::printf("per 9B prefill of %lld tokens: default %.2f ms, best of each %.2f ms\n", static_cast<long long>(M),
                total_default, total_best);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_prefill_gemm: %s\n", e.what());
    return 1;
  }
  return 0;
}
