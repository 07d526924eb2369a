// bench_fp8_gemm --search (algo_search.h).
#include "programs/bench_fp8_gemm/algo_search.h"

#include <cublasLt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "programs/bench_fp8_gemm/lt_bench.h"

namespace ds::bench {
namespace {

bool ok(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }

template <typename T>
std::vector<T> cap_list(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  size_t bytes = 0;
  if (!ok(cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes)) || bytes == 0) return {};
  std::vector<T> v(bytes / sizeof(T));
  if (!ok(cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), bytes, &bytes))) return {};
  return v;
}
template <typename T>
T cap(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  size_t got = 0;
  cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof v, &got);
  return v;
}


}  // namespace

void fp8_algo_search(cudaStream_t stream, void* ws, size_t ws_bytes, const uint8_t* wc, const float* wsc,
                     const uint8_t* xc, const float* xsc, float* out, int64_t M, int64_t N, int64_t K, int reps,
                     int top, int budget_s) {
  static cublasLtHandle_t lt = [] {
    cublasLtHandle_t h = nullptr;
    if (!ok(cublasLtCreate(&h))) std::exit(1);
    return h;
  }();
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  bool good = ok(block_scaled_desc(&desc, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
                                   CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F));
  good = good && ok(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &wsc, sizeof wsc));
  good = good && ok(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &xsc, sizeof xsc));
  good = good && ok(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, N, K));
  good = good && ok(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, M, K));
  good = good && ok(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, N, M, N));
  good = good && ok(cublasLtMatmulPreferenceCreate(&pref));
  good = good && ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                         sizeof ws_bytes));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  good = good && ok(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &heur, &found)) && found > 0;
  if (!good) {
    std::printf("search %lldx%lld M %lld | no heuristic algorithm\n", static_cast<long long>(N),
                static_cast<long long>(K), static_cast<long long>(M));
    return;
  }
  const float alpha = 1.0f, beta = 0.0f;
  auto run = [&](const cublasLtMatmulAlgo_t& a) {
    return cublasLtMatmul(lt, desc, &alpha, wc, la, xc, lb, &beta, out, ld, out, ld, &a, ws, ws_bytes, stream);
  };
  const size_t n_out = static_cast<size_t>(M * N);
  auto fetch = [&] {
    std::vector<float> h(n_out);
    check_cuda(cudaMemcpyAsync(h.data(), out, n_out * 4, cudaMemcpyDeviceToHost, stream), "copy out");
    check_cuda(cudaStreamSynchronize(stream), "sync");
    return h;
  };
  if (!ok(run(heur.algo))) return;
  const std::vector<float> ref = fetch();
  double ref_max = 0;
  for (float v : ref) ref_max = std::max(ref_max, static_cast<double>(std::fabs(v)));
  auto time_us = [&](const cublasLtMatmulAlgo_t& a) { return median_us(stream, reps, [&] { run(a); }, true); };
  const double t_heur = time_us(heur.algo);

  int ids[256];
  int n_ids = 0;
  if (!ok(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_32F,
                                   CUDA_R_32F, 256, ids, &n_ids)))
    n_ids = 0;
  struct Result {
    double us;
    std::string config;
    double err;
  };
  std::vector<Result> results;
  int checked = 0, accepted = 0, wrong = 0;
  const uint16_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1};
  // A search of a large space stops timing after a budget (the summary says so).
  const auto start = std::chrono::steady_clock::now();
  bool truncated = false;
  auto over_budget = [&] {
    truncated = truncated || std::chrono::steady_clock::now() - start > std::chrono::seconds(budget_s);
    return truncated;
  };
  for (int i = 0; i < n_ids; ++i) {
    cublasLtMatmulAlgo_t base{};
    if (!ok(cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_32F,
                                   CUDA_R_32F, ids[i], &base)))
      continue;
    std::vector<uint32_t> tiles = cap_list<uint32_t>(base, CUBLASLT_ALGO_CAP_TILE_IDS);
    std::vector<uint32_t> stages = cap_list<uint32_t>(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
    if (tiles.empty()) tiles.push_back(CUBLASLT_MATMUL_TILE_UNDEFINED);
    if (stages.empty()) stages.push_back(CUBLASLT_MATMUL_STAGES_UNDEFINED);
    const bool splits = cap<int32_t>(base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0;
    const uint32_t red_mask = cap<uint32_t>(base, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
    const bool swz = cap<uint32_t>(base, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT) != 0;
    std::printf("search %lldx%lld M %lld | algo id %d: %zu tiles, %zu stages, splitk %d, reductions 0x%x, swizzle %d\n",
                static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(M), ids[i], tiles.size(),
                stages.size(), splits, red_mask, swz);
    std::vector<int32_t> split_list = {1};
    if (splits)
      for (int32_t s : {2, 3, 4, 6, 8, 12, 16}) split_list.push_back(s);
    for (uint32_t tile : tiles)
      for (uint32_t st : stages)
        for (int32_t sk : split_list)
          for (uint32_t red : {CUBLASLT_REDUCTION_SCHEME_NONE, CUBLASLT_REDUCTION_SCHEME_INPLACE,
                               CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE}) {
            if ((sk == 1) != (red == CUBLASLT_REDUCTION_SCHEME_NONE)) continue;
            if (red != CUBLASLT_REDUCTION_SCHEME_NONE && !(red_mask & red)) continue;
            for (uint32_t sw = 0; sw <= (swz ? 1u : 0u); ++sw)
              for (uint16_t cl : clusters) {
                if (over_budget()) break;
                cublasLtMatmulAlgo_t a = base;
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &st, sizeof st);
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof sk);
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red);
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &sw, sizeof sw);
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof cl);
                ++checked;
                cublasLtMatmulHeuristicResult_t chk{};
                if (!ok(cublasLtMatmulAlgoCheck(lt, desc, la, lb, ld, ld, &a, &chk)) || chk.workspaceSize > ws_bytes)
                  continue;
                ++accepted;
                // NaNs first: a configuration that writes nothing fails.
                check_cuda(cudaMemsetAsync(out, 0xff, n_out * 4, stream), "poison");
                if (!ok(run(a))) continue;
                const std::vector<float> h = fetch();
                double err = 0;
                for (size_t j = 0; j < n_out; ++j) {
                  const double d = std::fabs(static_cast<double>(h[j]) - ref[j]);
                  err = std::isnan(d) ? 1e30 : std::max(err, d);
                }
                err /= ref_max > 0 ? ref_max : 1.0;
                if (err > 1e-3) {
                  ++wrong;
                  continue;
                }
                results.push_back({time_us(a), describe_algo(a), err});
              }
          }
  }
  check_cuda(cudaGetLastError(), "search");
  std::sort(results.begin(), results.end(), [](const Result& a, const Result& b) { return a.us < b.us; });
  const double floor_bytes = static_cast<double>(N * K + M * K + M * N * 4);
  for (int i = 0; i < std::min<int>(top, static_cast<int>(results.size())); ++i)
    std::printf("search %lldx%lld M %lld | #%d %.1f us (%.2f TB/s) err %.1e | %s\n", static_cast<long long>(N),
                static_cast<long long>(K), static_cast<long long>(M), i, results[i].us,
                floor_bytes / results[i].us / 1e6, results[i].err, results[i].config.c_str());
  std::printf("search summary | %lldx%lld | M %lld | heuristic %.1f us (%s) | best %.1f us | heuristic/best %.2f | "
              "%d checked, %d accepted, %d wrong, %zu timed%s\n",
              static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(M), t_heur,
              describe_algo(heur.algo).c_str(), results.empty() ? 0.0 : results[0].us,
              results.empty() ? 0.0 : t_heur / results[0].us, checked, accepted, wrong, results.size(),
              truncated ? " (budget reached)" : "");
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(desc);
}

}  // namespace ds::bench
