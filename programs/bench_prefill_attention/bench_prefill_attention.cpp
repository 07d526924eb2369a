// bench_prefill_attention: one chunk of T new tokens after C cached ones attending through the
// fused paged prefill kernel (kernels/cuda/attention_prefill.cu), per layer, as
//   tokens, cached, splits, ms, TFLOP/s, fraction of the bf16 GEMM rate
// where the FLOPs are those of the causal product (4 * D * Hq per visible (query, key) pair)
// and the rate is cuBLAS's on an 8192^3 GEMM measured in the same run (device_ceilings.h).
// The pool's blocks are shuffled, as a long-running server's are.
//   bench_prefill_attention [--tokens 4096,32768,131072] [--cached 0] [--heads 16] [--kv-heads 4]
//                           [--kv-dtype bf16] [--iters 5] [--json FILE]
// --json FILE: the same rows as a result file (programs/bench_result/result_file.h).
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/backend_ops.h"
#include "programs/bench_cuda_model/bench_util.h"
#include "programs/bench_cuda_model/device_ceilings.h"
#include "programs/bench_result/result_file.h"

namespace {

using namespace ds;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

DType parse_kv(const std::string& s) {
  for (DType t : {DType::bf16, DType::f16, DType::q8_0, DType::q4_0})
    if (dtype_name(t) == s) return t;
  throw std::invalid_argument("--kv-dtype: bf16, f16, q8_0 or q4_0");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Fused paged prefill attention at model shapes, against the bf16 GEMM rate."};
  std::string tokens_s = "4096,32768,131072", cached_s = "0", kv_s = "bf16";
  int32_t nq = 16, nkv = 4, iters = 5;
  const int32_t d = 256, bs = 16;
  app.add_option("--tokens", tokens_s, "chunk lengths");
  app.add_option("--cached", cached_s, "cached positions before each chunk (one run per pair)");
  app.add_option("--heads", nq, "query heads");
  app.add_option("--kv-heads", nkv, "KV heads");
  app.add_option("--kv-dtype", kv_s, "K/V pool type");
  app.add_option("--iters", iters, "timed runs per point (median)")->check(CLI::PositiveNumber);
  std::string json_path;
  app.add_option("--json", json_path, "also write the measurements to FILE as JSON (bench/README.md)");
  CLI11_PARSE(app, argc, argv);
  bench::ResultFile result("bench_prefill_attention", argc, argv);
  try {
    const DType kv = parse_kv(kv_s);
    const auto ceil = cuda::measure_device_ceilings();
    std::printf("%s, %d SMs, bf16 GEMM %.0f TFLOP/s\n", ceil.gpu.c_str(), ceil.sm_count, ceil.bf16_flops / 1e12);
    result.set("gpu", ceil.gpu);
    result.set("bf16_tflop_per_s", ceil.bf16_flops / 1e12);
    result.set("heads", std::to_string(nq) + "/" + std::to_string(nkv));
    result.set("kv_dtype", kv_s);
    std::printf("tokens,cached,splits,ms,TFLOPs,frac_of_gemm\n");
    cudaStream_t stream;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    for (int64_t T : bench::parse_list(tokens_s)) {
      for (int64_t C : bench::parse_list(cached_s)) {
        const int64_t L = C + T, blocks = (L + bs - 1) / bs;
        std::vector<int32_t> table(static_cast<size_t>(blocks));
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), std::mt19937(7));
        const size_t pool_bytes = static_cast<size_t>(blocks * bs * nkv) * static_cast<size_t>(row_bytes(kv, d));
        void *k, *v, *q, *out, *tbl;
        check(cudaMalloc(&k, pool_bytes), "pool");
        check(cudaMalloc(&v, pool_bytes), "pool");
        check(cudaMalloc(&q, static_cast<size_t>(T * nq * d) * 4), "q");
        check(cudaMalloc(&out, static_cast<size_t>(T * nq * d) * 2), "out");
        check(cudaMalloc(&tbl, table.size() * 4), "table");
        // Small positive values everywhere (0x3c3c...: bf16 ~0.011, f16 ~1.06, a valid quantised
        // scale): the kernel's work does not depend on them.
        check(cudaMemset(k, 0x3c, pool_bytes), "memset");
        check(cudaMemset(v, 0x3c, pool_bytes), "memset");
        check(cudaMemset(q, 0x3c, static_cast<size_t>(T * nq * d) * 4), "memset");
        check(cudaMemcpy(tbl, table.data(), table.size() * 4, cudaMemcpyHostToDevice), "table");
        cuda::ops::PrefillAttention a;
        a.q = static_cast<const float*>(q);
        a.out = out;
        a.out_type = DType::bf16;
        a.k_pool = k;
        a.v_pool = v;
        a.k_type = a.v_type = kv;
        a.k_row_bytes = a.v_row_bytes = row_bytes(kv, d);
        a.block_table = static_cast<const int32_t*>(tbl);
        a.block_size = bs;
        a.n_cached = C;
        a.n_tokens = T;
        a.n_q_heads = nq;
        a.n_kv_heads = nkv;
        a.head_dim = d;
        a.scale = 1.0f / 16.0f;
        const int32_t splits = cuda::ops::prefill_attention_splits(a, ceil.sm_count);
        const size_t floats = cuda::ops::prefill_attention_scratch_floats(a, splits);
        void* scratch = nullptr;
        if (floats) check(cudaMalloc(&scratch, floats * 4), "scratch");
        const double med = bench::median_ms(stream, iters, [] {}, [&] {
          cuda::ops::prefill_attention(a, splits, static_cast<float*>(scratch), {stream, false});
        });
        const double flops = 4.0 * d * nq * (static_cast<double>(T) * C + static_cast<double>(T) * (T + 1) / 2);
        const double rate = flops / (med * 1e-3);
        std::printf("%lld,%lld,%d,%.3f,%.0f,%.2f\n", static_cast<long long>(T), static_cast<long long>(C), splits, med,
                    rate / 1e12, rate / ceil.bf16_flops);
        result.add("prefill attention " + std::to_string(T) + " tokens after " + std::to_string(C), med, "ms",
                   {{"tokens", T}, {"cached", C}, {"splits", splits}, {"tflop_per_s", rate / 1e12},
                    {"of_gemm_rate", rate / ceil.bf16_flops}});
        for (void* p : {k, v, q, out, tbl, scratch})
          if (p) cudaFree(p);
      }
    }
    result.write(json_path);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_prefill_attention: %s\n", e.what());
    return 1;
  }
}
