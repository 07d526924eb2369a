// bench_deltanet: the chunked gated delta rule of one DeltaNet layer (kernels/cuda/
// delta_rule_tc.cu, and the fp32 path of delta_rule.cu it replaced in production) on S
// sequences of T / S tokens each, from a random state, per layer, as
//   tokens, seqs, k_heads, v_heads, math, ms, M tokens/s, of bytes floor, of FLOP floor
// The bytes floor is the layer's unavoidable traffic (q, k, v read in f32 as the conv writes
// them, the output written, the state read and written) over the measured copy rate; the FLOP
// floor the chunk form's useful products (A, P, the triangular solves, W S, Kᵀ V', Q S, P V')
// over the measured bf16 GEMM rate (device_ceilings.h). Both paths run on the same inputs;
// with --check the tensor-core output and final state are compared with the fp32 path's.
//   bench_deltanet [--tokens 4096,16384,65536] [--v-heads 32,48] [--k-heads 16] [--seqs 1]
//                  [--math both|tc|fp32] [--iters 5] [--check] [--chained] [--json FILE]
// --json FILE: the same rows as a result file (programs/bench_result/result_file.h).
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/backend_ops.h"
#include "model/qwen35/refcheck.h"
#include "programs/bench_cuda_model/bench_util.h"
#include "programs/bench_cuda_model/device_ceilings.h"
#include "programs/bench_result/result_file.h"

namespace {

using namespace ds;
namespace ops = ds::cuda::ops;

using bench::parse_list;
using ops::check_cuda;

// A device buffer of n floats filled from a repeating block of normal(0, scale) values.
float* random_floats(int64_t n, float scale, uint64_t seed) {
  const int64_t block = std::min<int64_t>(n, int64_t{1} << 22);
  std::vector<float> h(static_cast<size_t>(block));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  for (auto& x : h) x = dist(rng);
  float* d = nullptr;
  check_cuda(cudaMalloc(&d, static_cast<size_t>(n) * 4), "cudaMalloc");
  for (int64_t at = 0; at < n; at += block)
    check_cuda(cudaMemcpy(d + at, h.data(), static_cast<size_t>(std::min(block, n - at)) * 4, cudaMemcpyHostToDevice),
          "upload");
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Chunked gated delta rule (one DeltaNet layer) at model shapes: tensor cores vs fp32, against floors."};
  std::string tokens_s = "4096,16384,65536", vheads_s = "32,48", math_s = "both";
  int32_t hk = 16, seqs = 1, iters = 5;
  bool do_check = false, chained = false;
  app.add_option("--tokens", tokens_s, "tokens per point (all sequences together)");
  app.add_option("--v-heads", vheads_s, "value heads (32: Qwen3.5-9B, 48: 27B)");
  app.add_option("--k-heads", hk, "key heads");
  app.add_option("--seqs", seqs, "sequences per point (the tokens split evenly)")->check(CLI::PositiveNumber);
  app.add_option("--math", math_s, "both, tc (tensor cores) or fp32")->check(CLI::IsMember({"both", "tc", "fp32"}));
  app.add_option("--iters", iters, "timed runs per point (median)")->check(CLI::PositiveNumber);
  app.add_flag("--chained", chained, "launch as the model does: kernels chained as programmatic dependent launches");
  app.add_flag("--check", do_check, "compare the tensor-core output and state with the fp32 path's");
  std::string json_path;
  app.add_option("--json", json_path, "also write the measurements to FILE as JSON (bench/README.md)");
  CLI11_PARSE(app, argc, argv);
  bench::ResultFile result("bench_deltanet", argc, argv);
  try {
    constexpr int64_t D = 128, C = ops::kDeltaNetChunk;
    const auto ceil = cuda::measure_device_ceilings();
    std::printf("%s, %d SMs, copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s\n", ceil.gpu.c_str(), ceil.sm_count,
                ceil.copy_bytes_per_s / 1e9, ceil.bf16_flops / 1e12);
    result.set("gpu", ceil.gpu);
    result.set("copy_gb_per_s", ceil.copy_bytes_per_s / 1e9);
    result.set("bf16_tflop_per_s", ceil.bf16_flops / 1e12);
    result.set("chained", chained);
    std::printf("tokens,seqs,k_heads,v_heads,math,ms,Mtok_per_s,of_bytes_floor,of_flop_floor\n");
    cudaStream_t stream;
    check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
    std::vector<ops::DeltaNetChunkMath> maths;
    if (math_s != "fp32") maths.push_back(ops::DeltaNetChunkMath::tensor_cores);
    if (math_s != "tc") maths.push_back(ops::DeltaNetChunkMath::fp32);
    for (int64_t hv : parse_list(vheads_s)) {
      if (hv % hk != 0) throw std::invalid_argument("--v-heads must be multiples of --k-heads");
      for (int64_t T : parse_list(tokens_s)) {
        if (T % seqs != 0 || T / seqs <= ops::kDeltaNetRecurrentMaxTokens)
          throw std::invalid_argument("--tokens must split into --seqs chunked sequences");
        const int64_t per = T / seqs, conv_dim = 2 * hk * D + hv * D;
        // The plan: sequence s holds rows [s * per, (s + 1) * per) and state slot s.
        std::vector<ops::DevSeq> dseqs;
        std::vector<ops::DeltaNetChunkItem> items;
        std::vector<ops::DeltaNetChunkSeq> cseqs;
        for (int32_t s = 0; s < seqs; ++s) {
          dseqs.push_back({static_cast<int32_t>(s * per), static_cast<int32_t>(per), 0, s, 0, 0});
          cseqs.push_back(ops::append_chunk_items(items, s, static_cast<int32_t>(s * per), static_cast<int32_t>(per)));
        }
        const int64_t state_floats = seqs * hv * D * D;
        float* qkv = random_floats(T * conv_dim, 1.0f, 1);
        float* av = random_floats(T * hv, 1.0f, 2);
        float* bv = random_floats(T * hv, 1.0f, 3);
        std::vector<float> a_log(static_cast<size_t>(hv)), dt(static_cast<size_t>(hv));
        for (int64_t j = 0; j < hv; ++j) {
          a_log[static_cast<size_t>(j)] = std::log(1.0f + 15.0f * static_cast<float>(j) / static_cast<float>(hv));
          dt[static_cast<size_t>(j)] = -2.0f + 0.05f * static_cast<float>(j);
        }
        float *alog_d, *dt_d, *state, *state0, *out, *scratch;
        ops::DevSeq* seqs_d;
        ops::DeltaNetChunkItem* items_d;
        ops::DeltaNetChunkSeq* cseqs_d;
        check_cuda(cudaMalloc(&alog_d, static_cast<size_t>(hv) * 4), "cudaMalloc");
        check_cuda(cudaMalloc(&dt_d, static_cast<size_t>(hv) * 4), "cudaMalloc");
        check_cuda(cudaMemcpy(alog_d, a_log.data(), a_log.size() * 4, cudaMemcpyHostToDevice), "upload");
        check_cuda(cudaMemcpy(dt_d, dt.data(), dt.size() * 4, cudaMemcpyHostToDevice), "upload");
        state0 = random_floats(state_floats, 0.05f, 4);
        check_cuda(cudaMalloc(&state, static_cast<size_t>(state_floats) * 4), "cudaMalloc");
        check_cuda(cudaMalloc(&out, static_cast<size_t>(T * hv * D) * 4), "cudaMalloc");
        check_cuda(cudaMalloc(&scratch, items.size() * static_cast<size_t>(hv * ops::kDeltaNetScratchFloats) * 4),
              "cudaMalloc scratch");
        check_cuda(cudaMalloc(&seqs_d, dseqs.size() * sizeof(ops::DevSeq)), "cudaMalloc");
        check_cuda(cudaMalloc(&items_d, items.size() * sizeof(ops::DeltaNetChunkItem)), "cudaMalloc");
        check_cuda(cudaMalloc(&cseqs_d, cseqs.size() * sizeof(ops::DeltaNetChunkSeq)), "cudaMalloc");
        check_cuda(cudaMemcpy(seqs_d, dseqs.data(), dseqs.size() * sizeof(ops::DevSeq), cudaMemcpyHostToDevice), "upload");
        check_cuda(cudaMemcpy(items_d, items.data(), items.size() * sizeof(ops::DeltaNetChunkItem), cudaMemcpyHostToDevice),
              "upload");
        check_cuda(cudaMemcpy(cseqs_d, cseqs.data(), cseqs.size() * sizeof(ops::DeltaNetChunkSeq), cudaMemcpyHostToDevice),
              "upload");
        const ops::DeltaNetArgs g{.qkv = qkv, .a = av, .b = bv, .a_log = alog_d, .dt_bias = dt_d, .state = state, .state_type = DType::f32,
                                  .out = out, .n_layers = 1, .layer = 0, .k_heads = hk,
                                  .v_heads = static_cast<int32_t>(hv), .k_dim = static_cast<int32_t>(D),
                                  .v_dim = static_cast<int32_t>(D), .seqs = seqs_d, .row_state_slots = nullptr, .snapshots = nullptr};

        // Floors: bytes (q, k, v in f32, a and b, the output, the state in and out) and FLOPs.
        const double bytes = static_cast<double>(T) * (conv_dim + 2 * hv + hv * D) * 4 + 2.0 * state_floats * 4;
        const double chunk_heads = static_cast<double>(items.size()) * hv;
        const double flops = chunk_heads * 2.0 * (2.5 * C * C * D + 3.0 * C * D * D);
        const double bytes_ms = bytes / ceil.copy_bytes_per_s * 1e3, flop_ms = flops / ceil.bf16_flops * 1e3;

        std::vector<std::vector<float>> outs, states;
        for (const auto math : maths) {
          const double med = bench::median_ms(
              stream, iters,
              [&] {
                check_cuda(cudaMemcpyAsync(state, state0, static_cast<size_t>(state_floats) * 4, cudaMemcpyDeviceToDevice,
                                           stream),
                           "state reset");
              },
              [&] {
                ops::deltanet_chunked(g, items_d, static_cast<int32_t>(items.size()), cseqs_d,
                                      static_cast<int32_t>(cseqs.size()), scratch, math, ceil.sm_count, {stream, chained});
              });
          std::printf("%lld,%d,%d,%lld,%s,%.3f,%.2f,%.2f,%.2f\n", static_cast<long long>(T), seqs, hk,
                      static_cast<long long>(hv), math == ops::DeltaNetChunkMath::tensor_cores ? "tc" : "fp32", med,
                      static_cast<double>(T) / med / 1e3, bytes_ms / med, flop_ms / med);
          const char* math_name = math == ops::DeltaNetChunkMath::tensor_cores ? "tc" : "fp32";
          result.add("deltanet " + std::to_string(T) + " tokens " + std::to_string(seqs) + " seqs " + std::to_string(hk) +
                         "/" + std::to_string(hv) + " heads " + math_name,
                     med, "ms",
                     {{"tokens", T}, {"seqs", seqs}, {"k_heads", hk}, {"v_heads", hv}, {"math", math_name},
                      {"mtok_per_s", static_cast<double>(T) / med / 1e3}, {"of_bytes_floor", bytes_ms / med},
                      {"of_flop_floor", flop_ms / med}});
          if (do_check) {
            // The first rows' output (at most 8192 tokens) and the whole final state of the last run.
            const int64_t rows = std::min<int64_t>(T, 8192);
            outs.emplace_back(static_cast<size_t>(rows * hv * D));
            states.emplace_back(static_cast<size_t>(state_floats));
            check_cuda(cudaMemcpy(outs.back().data(), out, outs.back().size() * 4, cudaMemcpyDeviceToHost), "download");
            check_cuda(cudaMemcpy(states.back().data(), state, states.back().size() * 4, cudaMemcpyDeviceToHost), "download");
          }
        }
        if (do_check && outs.size() == 2)
          std::printf("check %lld tokens, %lld value heads: tc vs fp32 output rel %.2e (first %lld tokens), state rel %.2e\n",
                      static_cast<long long>(T), static_cast<long long>(hv), qwen35::relative_error(outs[0], outs[1]),
                      static_cast<long long>(std::min<int64_t>(T, 8192)), qwen35::relative_error(states[0], states[1]));
        for (void* p : {static_cast<void*>(qkv), static_cast<void*>(av), static_cast<void*>(bv), static_cast<void*>(alog_d),
                        static_cast<void*>(dt_d), static_cast<void*>(state), static_cast<void*>(state0),
                        static_cast<void*>(out), static_cast<void*>(scratch), static_cast<void*>(seqs_d),
                        static_cast<void*>(items_d), static_cast<void*>(cseqs_d)})
          cudaFree(p);
      }
    }
    result.write(json_path);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_deltanet: %s\n", e.what());
    return 1;
  }
}
