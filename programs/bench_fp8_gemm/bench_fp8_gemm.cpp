// bench_fp8_gemm: one FP8-weight GEMM at a time, out [M, N] f32 = x [M, K] · wᵀ, four ways in
// one run: bf16 weights on cuBLAS (the bf16 model's path), FP8 weights dequantised to bf16 and
// cuBLAS (the FP8 path before the block-scaled GEMM), the FP8 skinny kernel (up to 64 rows),
// and x quantised per row and 128 columns + cuBLASLt's block-scaled FP8 GEMM (quantisation
// included in its time; up to 64 rows also with the heuristic's tiles instead of the decode
// tiles, fp8_block_gemm.h). Median of --reps after warm-up, as TFLOP/s and as a share of the
// bytes floor (weights as stored + x + out, over the measured copy rate).
//
//   bench_fp8_gemm [--rows 16,32,64,128,512,1024,4096] [--shapes 24576x4096,4096x12288,12288x4096]
//                  [--reps 20] [--flush-l2] [--probe] [--algos] [--search [--search-top 5] [--search-budget 20]]
//                  [--json FILE]
//
// --json FILE: the table's rows as a result file (programs/bench_result/result_file.h).
// --probe (first): which scale layouts cuBLASLt's VEC128_32F / BLK128x128_32F modes read, by
// running small GEMMs with distinct per-block scales in each candidate layout against an f64
// reference on the host; prints a line per candidate with its error.
// --algos: per shape and M, every algorithm the heuristic offers for the block-scaled GEMM,
// timed, and the first one with split-K (algo_sweep).
// --search: every configuration cuBLASLt accepts for the block-scaled GEMM, against the
// heuristic's, with the L2 flushed before each timed run (algo_search.h).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/fp8_block_gemm.h"
#include "programs/bench_cuda_model/bench_util.h"
#include "programs/bench_cuda_model/device_ceilings.h"
#include "programs/bench_fp8_gemm/algo_search.h"
#include "programs/bench_fp8_gemm/lt_bench.h"
#include "programs/bench_result/result_file.h"

using namespace ds;
using namespace ds::cuda;

namespace {

void ck(cudaError_t e, const char* what) { bench::check_cuda(e, what); }
void ckb(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: %s\n", what, cublasGetStatusString(s));
    std::exit(1);
  }
}

double e4m3(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -v : v;
}
uint8_t random_code(std::mt19937& rng) {
  for (;;) {
    const auto c = static_cast<uint8_t>(rng());
    if ((c & 0x7f) != 0x7f) return c;
  }
}
using bench::to_device;


// --probe: small GEMMs whose scales differ per block, straight on cuBLASLt, in every candidate
// form: which operand is the weight (A: out row-major [M, N]; B: out transposed), the output
// type, scale pointers set before or only after the heuristic, and each scale layout; each
// against the host. Run with CUBLASLT_LOG_LEVEL=2 to see why a form is refused.
struct ProbeForm {
  bool weight_is_a;
  cudaDataType_t d_type;
  bool pointers_first;
};

// Returns "" and fills out (row-major [M, N], f32) or the reason it did not run.
std::string probe_run(cublasLtHandle_t lt, cudaStream_t stream, void* ws, size_t ws_bytes, const ProbeForm& f,
                      const uint8_t* wc, const float* wscale, cublasLtMatmulMatrixScale_t wmode, const uint8_t* xc,
                      const float* xscale, int64_t M, int64_t N, int64_t K, std::vector<float>& out) {
  // A is stored k x m (transposed), B k x n; D m x n column-major.
  const int64_t m = f.weight_is_a ? N : M, n = f.weight_is_a ? M : N;
  const uint8_t *a = f.weight_is_a ? wc : xc, *b = f.weight_is_a ? xc : wc;
  const float *as = f.weight_is_a ? wscale : xscale, *bs = f.weight_is_a ? xscale : wscale;
  const cublasLtMatmulMatrixScale_t amode = f.weight_is_a ? wmode : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  const cublasLtMatmulMatrixScale_t bmode = f.weight_is_a ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : wmode;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  std::string err;
  auto st = [&](cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS && err.empty()) err = std::string(what) + ": " + cublasGetStatusString(s);
    return s == CUBLAS_STATUS_SUCCESS;
  };
  st(bench::block_scaled_desc(&desc, amode, bmode), "desc");
  auto set_pointers = [&] {
    st(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &as, sizeof as), "a scales");
    st(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &bs, sizeof bs), "b scales");
  };
  if (f.pointers_first) set_pointers();
  st(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, m, K), "layout a");
  st(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, n, K), "layout b");
  st(cublasLtMatrixLayoutCreate(&ld, f.d_type, m, n, m), "layout d");
  st(cublasLtMatmulPreferenceCreate(&pref), "pref");
  st(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes),
     "pref ws");
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  void* dd = nullptr;
  const size_t dbytes = static_cast<size_t>(M * N) * (f.d_type == CUDA_R_32F ? 4 : 2);
  ck(cudaMalloc(&dd, dbytes), "cudaMalloc");
  ck(cudaMemset(dd, 0, dbytes), "cudaMemset");
  if (err.empty() && st(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &r, &found), "heuristic") &&
      found == 0)
    err = "heuristic: no algorithm";
  if (err.empty()) {
    if (!f.pointers_first) set_pointers();
    const float alpha = 1.0f, beta = 0.0f;
    st(cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, dd, ld, dd, ld, &r.algo, ws, ws_bytes, stream), "matmul");
  }
  if (err.empty()) {
    const cudaError_t e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) err = std::string("sync: ") + cudaGetErrorString(e);
  }
  if (err.empty()) {
    out.assign(static_cast<size_t>(M * N), 0.0f);
    std::vector<uint16_t> h16(static_cast<size_t>(M * N));
    std::vector<float> h32(static_cast<size_t>(M * N));
    if (f.d_type == CUDA_R_32F)
      ck(cudaMemcpy(h32.data(), dd, dbytes, cudaMemcpyDeviceToHost), "copy");
    else {
      ck(cudaMemcpy(h16.data(), dd, dbytes, cudaMemcpyDeviceToHost), "copy");
      for (size_t i = 0; i < h16.size(); ++i) {
        const uint32_t u = uint32_t{h16[i]} << 16;
        std::memcpy(&h32[i], &u, 4);
      }
    }
    // D column-major m x n: element (i, j) at i + j * m.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float v = h32[static_cast<size_t>(i + j * m)];
        if (f.weight_is_a)
          out[static_cast<size_t>(j * N + i)] = v;  // i: weight row, j: token
        else
          out[static_cast<size_t>(i * N + j)] = v;  // i: token, j: weight row
      }
  }
  cudaFree(dd);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (desc) cublasLtMatmulDescDestroy(desc);
  cudaGetLastError();
  return err;
}

void probe(cudaStream_t stream, void* ws, size_t ws_bytes) {
  std::mt19937 rng(7);
  const int64_t N = 384, K = 384;
  cublasLtHandle_t lt = nullptr;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return void(std::printf("probe: cublasLtCreate failed\n"));
  std::printf("probe: cuBLASLt version %zu\n", cublasLtGetVersion());
  for (const int64_t M : {256, 132, 136}) {
    const int64_t nb = N / 128, kb = K / 128, M4 = (M + 3) / 4 * 4;
    std::vector<uint8_t> wc(N * K), xc(M * K);
    for (auto& c : wc) c = random_code(rng);
    for (auto& c : xc) c = random_code(rng);
    std::uniform_real_distribution<double> sd(0.25, 4.0);
    std::vector<double> wsb(nb * kb), wsr(N * kb), xs(M * kb);  // block, per-row weight scales; x scales
    for (auto& s : wsb) s = sd(rng);
    for (auto& s : wsr) s = sd(rng);
    for (auto& s : xs) s = sd(rng);
    auto reference = [&](bool per_row) {
      std::vector<double> ref(M * N);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double w = e4m3(wc[n * K + k]) * (per_row ? wsr[n * kb + k / 128] : wsb[(n / 128) * kb + k / 128]);
            acc += w * e4m3(xc[m * K + k]) * xs[m * kb + k / 128];
          }
          ref[m * N + n] = acc;
        }
      return ref;
    };
    const auto ref_blk = reference(false), ref_row = reference(true);
    uint8_t *dwc = to_device(wc), *dxc = to_device(xc);
    struct XL { const char* name; int64_t rs, cs, size; };
    const XL xls[] = {{"x [K/128][M]", 1, M, M * kb}};
    (void)M4;
    // (2026-12-02: scale pointers set only after the heuristic were refused in every form, and
    // the weight as B matched exactly where it did as A; those forms are no longer tried.)
    const ProbeForm forms[] = {{true, CUDA_R_32F, true}, {true, CUDA_R_16BF, true}};
    for (const auto& f : forms) {
      for (const auto& xl : xls) {
        std::vector<float> hx(xl.size, 0.0f);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t b = 0; b < kb; ++b) hx[m * xl.rs + b * xl.cs] = static_cast<float>(xs[m * kb + b]);
        float* dxs = to_device(hx);
        // Weight scale layouts: per-row [K/128][N]; blocks [N/128][ld] and [K/128][ld] with ld
        // the other count or it rounded up to 4.
        for (int wl = 0; wl < 5; ++wl) {
          const bool per_row = wl == 0, transposed = wl == 2 || wl == 4, padded = wl >= 3;
          const int64_t rows = per_row ? N : nb;
          const int64_t ld_kmajor = padded ? (kb + 3) / 4 * 4 : kb, ld_nmajor = padded ? (rows + 3) / 4 * 4 : rows;
          std::vector<float> hw(static_cast<size_t>(std::max(rows * ld_kmajor, kb * ld_nmajor)), 0.0f);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t b = 0; b < kb; ++b)
              hw[static_cast<size_t>(per_row || transposed ? b * ld_nmajor + r : r * ld_kmajor + b)] =
                  static_cast<float>(per_row ? wsr[r * kb + b] : wsb[r * kb + b]);
          float* dws = to_device(hw);
          const auto wmode =
              per_row ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
          const char* names[] = {"w rows [K/128][N]", "w blocks [N/128][K/128]", "w blocks [K/128][N/128]",
                                 "w blocks [N/128][K/128 up to 4]", "w blocks [K/128][N/128 up to 4]"};
          const char* wname = names[wl];
          std::vector<float> out;
          const std::string err = probe_run(lt, stream, ws, ws_bytes, f, dwc, dws, wmode, dxc, dxs, M, N, K, out);
          double worst = 0;
          if (err.empty()) {
            const auto& ref = per_row ? ref_row : ref_blk;
            double scale = 0;
            for (double r : ref) scale = std::max(scale, std::fabs(r));
            for (int64_t i = 0; i < M * N; ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]) / scale);
          }
          std::printf("probe M=%lld w as %s d %s ptrs %s | %-14s %-24s | %s%s\n", static_cast<long long>(M),
                      f.weight_is_a ? "A" : "B", f.d_type == CUDA_R_32F ? "f32" : "bf16",
                      f.pointers_first ? "first" : "after", xl.name, wname,
                      err.empty() ? ("err " + std::to_string(worst)).c_str() : err.c_str(),
                      err.empty() && worst < 1e-2 ? "  <-- MATCH" : "");
          cudaFree(dws);
        }
        cudaFree(dxs);
      }
    }
    cudaFree(dwc);
    cudaFree(dxc);
  }
  cublasLtDestroy(lt);
}

// --flush-l2: the table's timings with the L2 flushed before each repetition.
bool g_flush_l2 = false;

template <typename F>
double median_us(cudaStream_t stream, int reps, F&& f) {
  return bench::median_us(stream, reps, std::forward<F>(f), g_flush_l2);
}

// --algos: every algorithm cuBLASLt's heuristic offers for the block-scaled FP8 GEMM of
// [M, K] x [N, K]ᵀ (w 128 x 128 block scales, x per row and 128 columns, f32 out), each timed
// (median of reps, the matmul alone), and the first one's configuration again with split-K 2,
// 4 and 8 where the library accepts it: is the heuristic's first choice (what
// Fp8BlockGemm runs) the fastest for decode-sized M?
void algo_sweep(cudaStream_t stream, void* ws, size_t ws_bytes, const uint8_t* wc, const float* wsc,
                const uint8_t* xc, const float* xsc, float* out, int64_t M, int64_t N, int64_t K, int reps) {
  static cublasLtHandle_t lt = [] {
    cublasLtHandle_t h = nullptr;
    if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS) std::exit(1);
    return h;
  }();
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ckb(bench::block_scaled_desc(&desc, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F),
      "desc");
  ckb(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &wsc, sizeof wsc), "a scales");
  ckb(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &xsc, sizeof xsc), "b scales");
  ckb(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, N, K), "layout a");
  ckb(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, M, K), "layout b");
  ckb(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, N, M, N), "layout d");
  ckb(cublasLtMatmulPreferenceCreate(&pref), "pref");
  ckb(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes),
      "pref ws");
  constexpr int kMax = 32;
  cublasLtMatmulHeuristicResult_t res[kMax] = {};
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, kMax, res, &found) != CUBLAS_STATUS_SUCCESS)
    found = 0;
  const float alpha = 1.0f, beta = 0.0f;
  auto time_algo = [&](const cublasLtMatmulAlgo_t& algo) {
    if (cublasLtMatmul(lt, desc, &alpha, wc, la, xc, lb, &beta, out, ld, out, ld, &algo, ws, ws_bytes, stream) !=
        CUBLAS_STATUS_SUCCESS)
      return -1.0;
    return median_us(stream, reps, [&] {
      cublasLtMatmul(lt, desc, &alpha, wc, la, xc, lb, &beta, out, ld, out, ld, &algo, ws, ws_bytes, stream);
    });
  };
  double first = -1, best = -1;
  int best_i = -1;
  for (int i = 0; i < found; ++i) {
    const double t = time_algo(res[i].algo);
    std::printf("algos %lldx%lld M %lld | #%d %s | %.1f us\n", static_cast<long long>(N), static_cast<long long>(K),
                static_cast<long long>(M), i, bench::describe_algo(res[i].algo).c_str(), t);
    if (i == 0) first = t;
    if (t > 0 && (best < 0 || t < best)) best = t, best_i = i;
  }
  if (found > 0) {
    for (uint32_t split : {2u, 4u, 8u, 16u}) {
      cublasLtMatmulAlgo_t algo = res[0].algo;
      cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split);
      cublasLtMatmulHeuristicResult_t check{};
      if (cublasLtMatmulAlgoCheck(lt, desc, la, lb, ld, ld, &algo, &check) != CUBLAS_STATUS_SUCCESS ||
          check.workspaceSize > ws_bytes) {
        std::printf("algos %lldx%lld M %lld | first with splitk %u: refused\n", static_cast<long long>(N),
                    static_cast<long long>(K), static_cast<long long>(M), split);
        continue;
      }
      const double t = time_algo(algo);
      std::printf("algos %lldx%lld M %lld | first with splitk %u | %.1f us\n", static_cast<long long>(N),
                  static_cast<long long>(K), static_cast<long long>(M), split, t);
      if (t > 0 && t < best) best = t, best_i = 100 + static_cast<int>(split);
    }
  }
  std::printf("algos summary | %lldx%lld | M %lld | %d offered | first %.1f us | best %.1f us (#%d) | first/best %.2f\n",
              static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(M), found, first, best,
              best_i, best > 0 ? first / best : 0.0);
  ck(cudaStreamSynchronize(stream), "sync");
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(desc);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_fp8_gemm"};
  std::string rows_s = "16,32,64,128,512,1024,4096", shapes_s = "24576x4096,4096x12288,12288x4096";
  int reps = 20;
  bool do_probe = false, do_algos = false, do_search = false;
  int search_top = 5, search_budget = 20;
  bool flush_l2 = false;
  app.add_flag("--flush-l2", flush_l2, "rewrite a 256 MiB buffer before each timed repetition (weights not in the L2)");
  app.add_option("--rows", rows_s, "rows of x (M)");
  app.add_option("--shapes", shapes_s, "weights NxK");
  app.add_option("--reps", reps, "timed repetitions")->check(CLI::PositiveNumber);
  app.add_flag("--probe", do_probe, "check the scale layouts cuBLASLt reads first");
  app.add_flag("--algos", do_algos, "also time every algorithm cuBLASLt offers for the block-scaled GEMM");
  app.add_flag("--search", do_search, "also time every configuration cuBLASLt accepts for the block-scaled GEMM");
  app.add_option("--search-top", search_top, "configurations printed per search")->check(CLI::PositiveNumber);
  app.add_option("--search-budget", search_budget, "seconds of timing per search")->check(CLI::PositiveNumber);
  std::string json_path;
  app.add_option("--json", json_path, "also write the table to FILE as JSON (bench/README.md)");
  CLI11_PARSE(app, argc, argv);
  bench::ResultFile result("bench_fp8_gemm", argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  cudaStream_t stream;
  ck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  cublasHandle_t blas;
  ckb(cublasCreate(&blas), "cublasCreate");
  ckb(cublasSetStream(blas, stream), "cublasSetStream");
  const size_t ws_bytes = 32u << 20;
  void* ws = nullptr;
  ck(cudaMalloc(&ws, ws_bytes), "workspace");
  ckb(cublasSetWorkspace(blas, ws, ws_bytes), "cublasSetWorkspace");
  if (do_probe) probe(stream, ws, ws_bytes);
  g_flush_l2 = flush_l2;

  const auto ceil = measure_device_ceilings();
  std::printf("gpu %s, %d SMs: copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s\n", ceil.gpu.c_str(), ceil.sm_count,
              ceil.copy_bytes_per_s / 1e9, ceil.bf16_flops / 1e12);
  result.set("gpu", ceil.gpu);
  result.set("copy_gb_per_s", ceil.copy_bytes_per_s / 1e9);
  result.set("bf16_tflop_per_s", ceil.bf16_flops / 1e12);
  result.set("flush_l2", flush_l2);
  const auto rows = bench::parse_list(rows_s);
  const std::vector<std::pair<int64_t, int64_t>> shapes = bench::parse_shapes(shapes_s);
  const int64_t max_m = *std::max_element(rows.begin(), rows.end());
  Fp8BlockGemm lt(stream, ws, ws_bytes);
  std::printf("\n| N x K | M | bf16 cuBLAS us | fp8 dequant+cuBLAS us | fp8 skinny us | fp8 block (quant+Lt) us | "
              "block TFLOP/s | block vs bf16 | block of bytes floor | block, heuristic's tiles us |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n");
  std::mt19937 rng(1);
  for (const auto& [N, K] : shapes) {
    std::vector<uint8_t> wc(N * K);
    for (auto& c : wc) c = static_cast<uint8_t>(rng()) & 0xbf;  // finite codes, |v| <= 2^-? small: exponent < 8
    std::vector<float> wsc(((N + 127) / 128) * (K / 128), 0.01f);
    std::vector<uint16_t> wb(N * K), xb(max_m * K);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& v : wb) v = 0x3c00 ^ (static_cast<uint16_t>(rng()) & 0x807f);
    for (auto& v : xb) {
      const float f = nd(rng);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      v = static_cast<uint16_t>(u >> 16);
    }
    uint8_t* dwc = to_device(wc);
    float* dws = to_device(wsc);
    uint16_t *dwb = to_device(wb), *dx = to_device(xb), *dtile = nullptr;
    ck(cudaMalloc(&dtile, N * K * 2), "tile");
    float* dout = nullptr;
    ck(cudaMalloc(&dout, max_m * N * 4), "out");
    uint8_t* xq = nullptr;
    ck(cudaMalloc(&xq, max_m * K + max_m * (K / 128) * 4 + 16), "xq");
    float* xs = reinterpret_cast<float*>(xq + (max_m * K + 15) / 16 * 16);
    const ops::Fp8Weight fw{dwc, dws, K / 128, 7};
    const ops::Stream st{stream, false};
    for (const int64_t M : rows) {
      const float alpha = 1.0f, beta = 0.0f;
      const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
      const double t_bf16 = median_us(stream, reps, [&] {
        ckb(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dwb, CUDA_R_16BF, k, dx, CUDA_R_16BF, k, &beta,
                         dout, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "bf16 gemm");
      });
      const double t_deq = median_us(stream, reps, [&] {
        ops::dequantize_fp8_bf16(fw, N, K, dtile, st);
        ckb(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dtile, CUDA_R_16BF, k, dx, CUDA_R_16BF, k,
                         &beta, dout, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "dequant gemm");
      });
      double t_skinny = 0;
      if (ops::skinny_gemm_fp8_supported(M, K))
        t_skinny = median_us(stream, reps, [&] { ops::skinny_gemm_fp8(fw, dx, M, N, K, dout, false, st); });
      double t_block = 0, t_block_heuristic = 0;
      const char* block_out = "f32";
      const auto wm = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, xm = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      for (DType dt : {DType::f32, DType::bf16}) {
        ops::quantize_rows_fp8(dx, M, K, xq, xs, 1, M, st);
        if (t_block > 0 || !lt.matmul({dwc, dws, wm}, {xq, xs, xm}, M, N, K, dout, dt, N, false)) continue;
        block_out = dt == DType::f32 ? "f32" : "bf16";
        t_block = median_us(stream, reps, [&] {
          ops::quantize_rows_fp8(dx, M, K, xq, xs, 1, M, st);
          lt.matmul({dwc, dws, wm}, {xq, xs, xm}, M, N, K, dout, dt, N, false);
        });
        // The same with the heuristic's tiles (Fp8BlockGemm's decode_tiles off): differs up to
        // Fp8BlockGemm::kDecodeTileRows rows.
        if (M <= Fp8BlockGemm::kDecodeTileRows &&
            lt.matmul({dwc, dws, wm}, {xq, xs, xm}, M, N, K, dout, dt, N, false, false))
          t_block_heuristic = median_us(stream, reps, [&] {
            ops::quantize_rows_fp8(dx, M, K, xq, xs, 1, M, st);
            lt.matmul({dwc, dws, wm}, {xq, xs, xm}, M, N, K, dout, dt, N, false, false);
          });
      }
      if (do_algos) {
        ops::quantize_rows_fp8(dx, M, K, xq, xs, 1, M, st);
        algo_sweep(stream, ws, ws_bytes, dwc, dws, xq, xs, dout, M, N, K, reps);
      }
      if (do_search) {
        ops::quantize_rows_fp8(dx, M, K, xq, xs, 1, M, st);
        bench::fp8_algo_search(stream, ws, ws_bytes, dwc, dws, xq, xs, dout, M, N, K, std::min(reps, 7), search_top,
                               search_budget);
      }
      const double flops = 2.0 * M * N * K;
      const double floor_us = (N * K + M * K * 2.0 + M * N * 4.0) / ceil.copy_bytes_per_s * 1e6;
      std::printf("| %lldx%lld | %lld | %.1f | %.1f | %s | %s | %.0f | %.2fx | %.0f%% | %s |\n", static_cast<long long>(N),
                  static_cast<long long>(K), static_cast<long long>(M), t_bf16, t_deq,
                  t_skinny > 0 ? std::to_string(t_skinny).substr(0, 6).c_str() : "-",
                  t_block > 0 ? (std::to_string(t_block).substr(0, 6) + " (" + block_out + " out)").c_str() : "no algorithm",
                  t_block > 0 ? flops / t_block / 1e6 : 0.0, t_block > 0 ? t_bf16 / t_block : 0.0,
                  t_block > 0 ? 100.0 * floor_us / t_block : 0.0,
                  t_block_heuristic > 0 ? std::to_string(t_block_heuristic).substr(0, 6).c_str() : "-");
      // The block-scaled FP8 GEMM's time is the row's value (0: no algorithm); the others beside it.
      result.add(std::to_string(N) + "x" + std::to_string(K) + " M " + std::to_string(M) + " fp8 block", t_block, "us",
                 {{"n", static_cast<long long>(N)}, {"k", static_cast<long long>(K)}, {"m", static_cast<long long>(M)},
                  {"bf16_cublas_us", t_bf16}, {"fp8_dequant_cublas_us", t_deq}, {"fp8_skinny_us", t_skinny},
                  {"block_heuristic_tiles_us", t_block_heuristic},
                  {"block_tflop_per_s", t_block > 0 ? flops / t_block / 1e6 : 0.0},
                  {"block_of_bytes_floor", t_block > 0 ? floor_us / t_block : 0.0}});
    }
    ck(cudaStreamSynchronize(stream), "sync");
    for (void* p : {static_cast<void*>(dwc), static_cast<void*>(dws), static_cast<void*>(dwb), static_cast<void*>(dx),
                    static_cast<void*>(dtile), static_cast<void*>(dout), static_cast<void*>(xq)})
      cudaFree(p);
  }
  try {
    result.write(json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_fp8_gemm: %s\n", e.what());
    return 1;
  }
  return 0;
}
