// bench_int4_gemm: the decode GEMMs of 4-bit weights one at a time, out [M, N] f32 = x [M, K] ·
// wᵀ, at the models' shapes: the int4 skinny kernel (ops::skinny_gemm_int4, group 128, no act
// order unless --act-order), beside the FP8 skinny kernel and bf16 cuBLAS on the same shape;
// "swiglu" shapes (Nx K with N = 2 x intermediate) time the one-row gate_up + SwiGLU kernel
// instead. Median of --reps, with the L2 flushed before each (--no-flush-l2 to keep it), in us
// and as a share of each format's bytes floor (weights as stored, scales and zeros included,
// + x + out, over the measured copy rate). "read us" is one launch of a plain read of the int4
// codes (stream_read.h), timed the same way: what any single kernel reading those bytes pays.
//
//   bench_int4_gemm [--rows 1,8,16,32,64] [--shapes 12288x4096,4096x4096,4096x12288]
//                   [--swiglu 24576x4096] [--reps 30] [--act-order] [--json FILE]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/backend_ops.h"
#include "programs/bench_cuda_model/bench_util.h"
#include "programs/bench_cuda_model/device_ceilings.h"
#include "programs/bench_fp8_gemm/lt_bench.h"
#include "programs/bench_result/result_file.h"
#include "programs/bench_int4_gemm/stream_read.h"

using namespace ds;
using namespace ds::cuda;

namespace {

constexpr int64_t kGroup = 128;

using bench::to_device;

// One shape's weights in the three formats, on the device.
struct Weights {
  ops::Int4Weight int4;
  ops::Fp8Weight fp8;
  uint16_t* bf16 = nullptr;
  std::vector<void*> owned;
  Weights(int64_t N, int64_t K, bool act_order, std::mt19937& rng) {
    std::vector<uint8_t> codes(static_cast<size_t>(N * K / 2));
    for (auto& c : codes) c = static_cast<uint8_t>(rng());
    std::vector<float> scales(static_cast<size_t>(N * (K / kGroup)), 0.01f);
    std::vector<uint8_t> zeros(scales.size());
    for (auto& z : zeros) z = static_cast<uint8_t>(rng() % 16);
    auto* staged = to_device(codes);
    auto* dc = to_device(codes);
    ops::repack_int4(staged, dc, N, K, ops::Stream{nullptr, false});
    ops::check_cuda(cudaDeviceSynchronize(), "int4 repack");
    ops::check_cuda(cudaFree(staged), "cudaFree");
    int4 = {dc, to_device(scales), to_device(zeros), kGroup, nullptr};
    owned = {dc, const_cast<float*>(int4.scales), const_cast<uint8_t*>(int4.zeros)};
    if (act_order) {
      std::vector<int32_t> perm(static_cast<size_t>(K));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      int4.perm = to_device(perm);
      owned.push_back(const_cast<int32_t*>(int4.perm));
    }
    std::vector<uint8_t> f8(static_cast<size_t>(N * K));
    for (auto& c : f8) c = static_cast<uint8_t>(rng()) & 0xbf;
    std::vector<float> f8s(static_cast<size_t>(((N + 127) / 128) * (K / 128)), 0.01f);
    fp8 = {to_device(f8), to_device(f8s), K / 128, 7};
    owned.push_back(const_cast<uint8_t*>(fp8.codes));
    owned.push_back(const_cast<float*>(fp8.scales));
    std::vector<uint16_t> wb(static_cast<size_t>(N * K));
    for (auto& v : wb) v = 0x3c00 ^ (static_cast<uint16_t>(rng()) & 0x807f);
    bf16 = to_device(wb);
    owned.push_back(bf16);
  }
  ~Weights() {
    for (void* p : owned) cudaFree(p);
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_int4_gemm: 4-bit decode GEMMs beside FP8 and bf16"};
  std::string rows_s = "1,8,16,32,64", shapes_s = "12288x4096,4096x4096,4096x12288", swiglu_s = "24576x4096",
              json_path;
  int reps = 30;
  bool act_order = false, no_flush = false;
  app.add_option("--rows", rows_s, "step rows M, comma separated");
  app.add_option("--shapes", shapes_s, "NxK weights of the plain GEMM");
  app.add_option("--swiglu", swiglu_s, "NxK [gate; up] weights of the one-row gate_up + SwiGLU");
  app.add_option("--reps", reps, "timed repetitions (the median is reported)");
  app.add_flag("--act-order", act_order, "GPTQ act order: the kernels gather x through a permutation");
  app.add_flag("--no-flush-l2", no_flush, "keep the L2 between repetitions (weights may stay in it)");
  app.add_option("--json", json_path, "write the rows as a result file");
  CLI11_PARSE(app, argc, argv);

  bench::ResultFile result("bench_int4_gemm", argc, argv);
  const auto ceil = measure_device_ceilings();
  std::printf("gpu %s, %d SMs: copy %.0f GB/s; L2 %s\n", ceil.gpu.c_str(), ceil.sm_count,
              ceil.copy_bytes_per_s / 1e9, no_flush ? "kept" : "flushed");
  result.set("gpu", ceil.gpu);
  result.set("copy_gb_per_s", ceil.copy_bytes_per_s / 1e9);
  result.set("flush_l2", !no_flush);
  result.set("act_order", act_order);
  cudaStream_t stream;
  ops::check_cuda(cudaStreamCreate(&stream), "stream");
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetStream(blas, stream);
  const ops::Stream st{stream, false};
  auto time = [&](auto&& f) { return bench::median_us(stream, reps, f, !no_flush); };

  const std::vector<int64_t> rows = bench::parse_list(rows_s);
  int64_t max_m = 1;
  for (int64_t m : rows) max_m = std::max(max_m, m);
  std::mt19937 rng(7);
  unsigned* sink = nullptr;
  ops::check_cuda(cudaMalloc(&sink, bench::stream_read_sink_words(ceil.sm_count) * sizeof(unsigned)), "sink");
  std::printf("\n| kernel | N x K | M | int4 us | int4 of floor | read us | int4 / read | fp8 us | fp8 of floor | bf16 cuBLAS us | int4 vs fp8 |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|\n");
  auto run_shape = [&](int64_t N, int64_t K, bool swiglu) {
    Weights w(N, K, act_order, rng);
    std::vector<uint16_t> xh(static_cast<size_t>(max_m * K));
    for (auto& v : xh) v = 0x3c00 ^ (static_cast<uint16_t>(rng()) & 0x807f);
    uint16_t* x = to_device(xh);
    float* out = nullptr;
    ops::check_cuda(cudaMalloc(&out, static_cast<size_t>(max_m * N) * 4), "out");
    const double tr = time([&] { bench::stream_read(w.int4.codes, static_cast<size_t>(N * K / 2), sink, ceil.sm_count, stream); });
    for (const int64_t M : swiglu ? std::vector<int64_t>{1} : rows) {
      if (!ops::skinny_gemm_int4_supported(M)) continue;
      double t4, t8 = 0, tb = 0;
      if (swiglu) {
        t4 = time([&] { ops::skinny_swiglu_int4(w.int4, x, N / 2, K, out, DType::f32, st); });
        t8 = time([&] { ops::skinny_swiglu_fp8(w.fp8, x, N / 2, K, out, DType::f32, st); });
      } else {
        t4 = time([&] { ops::skinny_gemm_int4(w.int4, x, M, N, K, out, false, st); });
        if (ops::skinny_gemm_fp8_supported(M, K))
          t8 = time([&] { ops::skinny_gemm_fp8(w.fp8, x, M, N, K, out, false, st); });
        const float alpha = 1.0f, beta = 0.0f;
        tb = time([&] {
          cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
                       &alpha, w.bf16, CUDA_R_16BF, static_cast<int>(K), x, CUDA_R_16BF, static_cast<int>(K), &beta,
                       out, CUDA_R_32F, static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        });
      }
      const double io = M * K * 2.0 + M * N * (swiglu ? 2.0 : 4.0);
      const double floor4 = (N * K / 2.0 + N * (K / kGroup) * 5.0 + io) / ceil.copy_bytes_per_s * 1e6;
      const double floor8 = (N * K * 1.0 + io) / ceil.copy_bytes_per_s * 1e6;
      const char* kind = swiglu ? "gate_up+swiglu" : "gemm";
      std::printf("| %s | %lldx%lld | %lld | %.2f | %.0f%% | %.2f | %.2fx | %.2f | %.0f%% | %.2f | %.2fx |\n", kind,
                  static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(M), t4,
                  100 * floor4 / t4, tr, t4 / tr, t8, t8 > 0 ? 100 * floor8 / t8 : 0.0, tb, t8 > 0 ? t8 / t4 : 0.0);
      result.add(std::string(kind) + " " + std::to_string(N) + "x" + std::to_string(K) + " M " + std::to_string(M) +
                     " int4",
                 t4, "us",
                 {{"n", static_cast<long long>(N)}, {"k", static_cast<long long>(K)}, {"m", static_cast<long long>(M)},
                  {"of_floor", floor4 / t4}, {"floor", std::string("int4 bytes")}, {"read_us", tr}, {"fp8_us", t8}, {"bf16_cublas_us", tb},
                  {"fp8_of_bytes_floor", t8 > 0 ? floor8 / t8 : 0.0}});
    }
    cudaFree(x);
    cudaFree(out);
  };
  for (const auto& [N, K] : bench::parse_shapes(shapes_s)) run_shape(N, K, false);
  for (const auto& [N, K] : bench::parse_shapes(swiglu_s)) run_shape(N, K, true);
  cublasDestroy(blas);
  cudaFree(sink);
  try {
    result.write(json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_int4_gemm: %s\n", e.what());
    return 1;
  }
  return 0;
}
