// bench_paged_attention: times paged decode attention at Qwen3.5-27B shapes (24 query heads,
// 4 KV heads, head_dim 256, block_size 16) and prints CSV for bench/peers/attention_report.py
// (and with --json FILE the same points as a result file, programs/bench_result/result_file.h).
//
// Grid: batch 1, 8, 32 x context 4K, 32K, 128K, plus the ragged batch 128K + 7 x 8K, for each
// K/V type given (K and V of the same type). Each point uses random data and shuffled block
// tables; when one batch's K/V is smaller than 256 MB the pool holds several copies and the
// timed runs rotate through them, so no run finds its K/V in the 50 MB L2. Time per call is
// the median over CUDA-event-timed runs of the decode kernel plus its merge (the plan is
// uploaded once, as the engine does once per step for all layers), on a non-blocking stream
// as the engine's. The device-to-device
// copy bandwidth (bytes read + written) is measured first, the same way as
// bench/peers/attention_torch.py does.
//
// Per-call event times include whatever the host's launches cost when the GPU outruns the
// CPU (batch 1: a call takes tens of microseconds of device time); the same calls captured in a CUDA graph
// with event nodes around each call give the device time alone (<graph us>, median per call),
// which is what an engine that captures its decode step (or runs ahead of the GPU) sees.
//
// Output lines: copy_bw,<GB/s> ; ours,<type>,<case>,<batch>,<ctx>,<us>,<kv_bytes>,<GB/s>,
// <fraction of copy bw>,<chunk>,<items>,<plan_us>,<blocks per SM>,<stages>,<KV heads per block>,
// <graph us>,<legacy-stream us> ; mem,<type>,ragged,<paged bytes>,<padded bytes>
// (<legacy-stream us>: the same event timing on the legacy default stream, which the
// benchmark used before 2026-12-01 and PyTorch uses unless told otherwise.)
//   bench_paged_attention [--types bf16,q8_0,q4_0] [--iters 30] [--quick] [--case B,L] [--chunk N] [--trace FILE] [--json FILE]
//   [--no-shuffle] [--kv-heads N] [--no-bulk-copies] [--no-token-rows] [--blocks-per-sm N]
//   [--token-rows-l2-promotion BYTES] [--unchained-merge]
// (--chunk N: N tokens per split instead of the planner's choice, for tuning the planner;
// --trace FILE: after timing, one more call through the traced kernels (decode_trace.h), whose
// per-block phase stamps are written to FILE as CSV, for the first case run; --no-shuffle: each sequence's
// blocks in order instead of shuffled; --kv-heads N: N KV heads of 6 query heads each instead
// of 4, to see how the interleaving of the heads' rows in the pool costs. The last five force a
// path of the kernel (DecodeOptions) for comparisons with what production chooses: cp.async
// instead of bulk tensor copies, a block per KV head instead of token-row tiles, at most N
// resident blocks per SM, another L2 promotion of the token-row boxes, a plain merge launch.)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/kv_elements.cuh"
#include "kernels/cuda/decode_trace.h"
#include "kernels/cuda/paged_attention.h"
#include "kernels/common/gpu_runtime.h"
#include "programs/bench_result/result_file.h"

namespace {

using ds::DType;
namespace dc = ds::cuda;

constexpr int kDim = 256, kBlock = 16;
// 24 query heads over 4 KV heads (Qwen3.5-27B); --kv-heads N keeps the group of 6 with N KV heads.
int g_kv_heads = 4, g_q_heads = 24;

__device__ float hash_uniform(uint64_t x) {  // splitmix64 -> [-2, 2)
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<float>(x >> 40) * (4.0f / 16777216.0f) - 2.0f;
}

// Fills rows [n_rows, head_dim] of type t with random values (encoded by the device codecs).
__global__ void fill_rows(uint8_t* pool, DType t, int64_t n_rows, int head_dim, uint64_t seed) {
  const int groups = head_dim / 32;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n_rows * groups) return;
  const int64_t row = idx / groups;
  const int g = static_cast<int>(idx % groups);
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = hash_uniform(seed ^ (static_cast<uint64_t>(idx) * 32 + j) * 0x100000001b3ull);
  uint8_t* r = pool + row * ds::row_bytes(t, head_dim);
  switch (t) {
    case DType::bf16:
      for (int j = 0; j < 32; ++j) reinterpret_cast<uint16_t*>(r)[32 * g + j] = ds::cuda::detail::f32_to_bf16_bits(x[j]);
      break;
    case DType::f16:
      for (int j = 0; j < 32; ++j) reinterpret_cast<uint16_t*>(r)[32 * g + j] = ds::cuda::detail::f32_to_f16_bits(x[j]);
      break;
    case DType::q8_0: ds::cuda::detail::quantize_q8_0(x, r + 34 * g); break;
    case DType::q4_0: ds::cuda::detail::quantize_q4_0(x, r + 18 * g); break;
    default: break;
  }
}

void fill(void* pool, DType t, int64_t n_rows, int head_dim, uint64_t seed) {
  const int64_t n = n_rows * (head_dim / 32);
  fill_rows<<<static_cast<unsigned>((n + 255) / 256), 256>>>(static_cast<uint8_t*>(pool), t, n_rows, head_dim, seed);
  DS_GPU_CHECK_LAUNCH();
}

template <class F>
float median_us(F&& fn, int iters, gpuStream_t st = nullptr) {
  std::vector<gpuEvent_t> ev(2 * iters);
  for (auto& e : ev) DS_GPU_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < iters; ++i) {
    DS_GPU_CHECK(gpuEventRecord(ev[2 * i], st));
    fn(i);
    DS_GPU_CHECK(gpuEventRecord(ev[2 * i + 1], st));
  }
  DS_GPU_CHECK(gpuStreamSynchronize(st));
  std::vector<float> t(iters);
  for (int i = 0; i < iters; ++i) DS_GPU_CHECK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  for (auto& e : ev) gpuEventDestroy(e);
  std::sort(t.begin(), t.end());
  return t[iters / 2] * 1000.0f;
}

// Device time per call with no host in the loop: fn(0..n-1, stream) captured once in a CUDA
// graph with an event record node before and after each call, replayed once to warm up and
// once timed; the median of the n per-call intervals (as median_us, without the launches).
template <class F>
float graph_median_us(F&& fn, int n) {
  cudaStream_t st;
  DS_GPU_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> ev(2 * n);
  for (auto& e : ev) DS_GPU_CHECK(cudaEventCreate(&e));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  DS_GPU_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < n; ++i) {
    DS_GPU_CHECK(cudaEventRecordWithFlags(ev[2 * i], st, cudaEventRecordExternal));
    fn(i, st);
    DS_GPU_CHECK(cudaEventRecordWithFlags(ev[2 * i + 1], st, cudaEventRecordExternal));
  }
  DS_GPU_CHECK(cudaStreamEndCapture(st, &g));
  DS_GPU_CHECK(cudaGraphInstantiate(&ge, g, 0));
  for (int r = 0; r < 2; ++r) DS_GPU_CHECK(cudaGraphLaunch(ge, st));
  DS_GPU_CHECK(cudaStreamSynchronize(st));
  std::vector<float> t(n);
  for (int i = 0; i < n; ++i) DS_GPU_CHECK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  for (auto& e : ev) DS_GPU_CHECK(cudaEventDestroy(e));
  DS_GPU_CHECK(cudaGraphExecDestroy(ge));
  DS_GPU_CHECK(cudaGraphDestroy(g));
  DS_GPU_CHECK(cudaStreamDestroy(st));
  std::sort(t.begin(), t.end());
  return t[n / 2] * 1000.0f;
}

double copy_bandwidth_gbps() {
  const size_t n = size_t{2} << 30;
  void *a, *b;
  DS_GPU_CHECK(gpuMalloc(&a, n));
  DS_GPU_CHECK(gpuMalloc(&b, n));
  DS_GPU_CHECK(gpuMemsetAsync(a, 1, n, nullptr));
  for (int i = 0; i < 3; ++i) DS_GPU_CHECK(gpuMemcpyAsync(b, a, n, gpuMemcpyDeviceToDevice, nullptr));
  const float us = median_us([&](int) { DS_GPU_CHECK(gpuMemcpyAsync(b, a, n, gpuMemcpyDeviceToDevice, nullptr)); }, 20);
  gpuFree(a);
  gpuFree(b);
  return 2.0 * static_cast<double>(n) / (us * 1e-6) / 1e9;
}

struct Case {
  std::string name;
  std::vector<int32_t> lens;
};

void run_case(DType t, const Case& c, int iters, double copy_gbps, const dc::DecodeOptions& forced,
              std::string& trace_path, bool shuffle, ds::bench::ResultFile& result) {
  const int64_t rb = ds::row_bytes(t, kDim);
  const int B = static_cast<int>(c.lens.size());
  int64_t blocks_per_copy = 0, max_blocks = 0, tokens = 0;
  for (int32_t L : c.lens) {
    blocks_per_copy += (L + kBlock - 1) / kBlock;
    max_blocks = std::max<int64_t>(max_blocks, (L + kBlock - 1) / kBlock);
    tokens += L;
  }
  const int64_t kv_bytes = tokens * g_kv_heads * 2 * rb;  // bytes the kernel must read
  const int64_t copy_bytes = blocks_per_copy * kBlock * g_kv_heads * 2 * rb;
  const int copies = static_cast<int>(std::clamp<int64_t>((int64_t{256} << 20) / std::max<int64_t>(copy_bytes, 1) + 1, 1, 64));
  const int64_t num_blocks = blocks_per_copy * copies;
  const int64_t rows = num_blocks * kBlock * g_kv_heads;

  dc::KvPoolView pools;
  pools.k_type = pools.v_type = t;
  pools.num_blocks = num_blocks;
  pools.block_size = kBlock;
  pools.n_kv_heads = g_kv_heads;
  pools.head_dim = kDim;
  DS_GPU_CHECK(gpuMalloc(&pools.k, static_cast<size_t>(rows * rb)));
  DS_GPU_CHECK(gpuMalloc(&pools.v, static_cast<size_t>(rows * rb)));
  fill(pools.k, t, rows, kDim, 0x1234);
  fill(pools.v, t, rows, kDim, 0x9876);

  // Tables: copy i uses blocks [i * blocks_per_copy, (i + 1) * blocks_per_copy), shuffled.
  std::mt19937 rng(42);
  std::vector<int32_t> table(static_cast<size_t>(copies) * B * max_blocks, 0);
  for (int cp = 0; cp < copies; ++cp) {
    std::vector<int32_t> ids(static_cast<size_t>(blocks_per_copy));
    std::iota(ids.begin(), ids.end(), static_cast<int32_t>(cp * blocks_per_copy));
    if (shuffle) std::shuffle(ids.begin(), ids.end(), rng);
    size_t next = 0;
    for (int s = 0; s < B; ++s)
      for (int64_t j = 0; j < (c.lens[s] + kBlock - 1) / kBlock; ++j)
        table[(static_cast<size_t>(cp) * B + s) * max_blocks + j] = ids[next++];
  }
  int32_t *d_table, *d_lens;
  DS_GPU_CHECK(gpuMalloc(reinterpret_cast<void**>(&d_table), table.size() * 4));
  DS_GPU_CHECK(gpuMalloc(reinterpret_cast<void**>(&d_lens), c.lens.size() * 4));
  DS_GPU_CHECK(gpuMemcpy(d_table, table.data(), table.size() * 4, gpuMemcpyHostToDevice));
  DS_GPU_CHECK(gpuMemcpy(d_lens, c.lens.data(), c.lens.size() * 4, gpuMemcpyHostToDevice));
  void *d_q, *d_out;
  DS_GPU_CHECK(gpuMalloc(&d_q, size_t{2} * B * g_q_heads * kDim));
  DS_GPU_CHECK(gpuMalloc(&d_out, size_t{2} * B * g_q_heads * kDim));
  fill(d_q, DType::bf16, int64_t{B} * g_q_heads, kDim, 0x5555);

  dc::DecodeOptions opts = forced;
  opts.bounds_check = false;
  const dc::DecodeLaunchConfig dev = dc::choose_decode_launch(pools, g_q_heads, opts);
  const auto p0 = std::chrono::steady_clock::now();
  const dc::DecodePlan plan = dc::plan_decode(dev, g_kv_heads, c.lens, opts.chunk_tokens);
  const double plan_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - p0).count();
  dc::DecodeWorkspace ws(static_cast<int32_t>(plan.items.size()), B, g_q_heads, kDim);
  ws.upload(plan, nullptr);

  dc::DecodeQuery q;
  q.q = d_q;
  q.q_type = DType::bf16;
  q.out = d_out;
  q.out_type = DType::bf16;
  q.n_seqs = B;
  q.n_q_heads = g_q_heads;
  q.scale = 1.0f / 16.0f;
  q.block_table_stride = static_cast<int32_t>(max_blocks);
  q.seq_lens = d_lens;
  auto run_on = [&](int i, gpuStream_t st) {
    q.block_table = d_table + static_cast<size_t>(i % copies) * B * max_blocks;
    dc::paged_attention_decode(pools, q, ws, opts, st);
  };
  // The engine's kind of stream (cuda_context.cpp): a non-blocking one; the legacy default
  // stream (this benchmark's before 2026-12-01, and PyTorch's) is timed last, for comparison.
  // Passes later in a process can run at other clocks than the first (the board's power cap:
  // docs/bench-log, 2026-12-01), so only same-position numbers are compared.
  cudaStream_t xs;
  DS_GPU_CHECK(cudaStreamCreateWithFlags(&xs, cudaStreamNonBlocking));
  DS_GPU_CHECK(cudaDeviceSynchronize());  // the fills and the plan's upload ran on the legacy stream
  auto run = [&](int i) { run_on(i, xs); };
  for (int i = 0; i < std::max(3, copies); ++i) run(i);
  DS_GPU_CHECK(gpuStreamSynchronize(xs));
  const int n = std::max(iters, 2 * copies);
  const float us = median_us(run, n, xs);
  const float graph_us = graph_median_us(run_on, n);
  for (int i = 0; i < 3; ++i) run_on(i, nullptr);
  const float legacy_us = median_us([&](int i) { run_on(i, nullptr); }, n, nullptr);
  const double gbps = static_cast<double>(kv_bytes) / (us * 1e-6) / 1e9;
  std::printf("ours,%s,%s,%d,%d,%.2f,%lld,%.0f,%.3f,%d,%zu,%.1f,%d,%d,%d,%.2f,%.2f\n", std::string(ds::dtype_name(t)).c_str(),
              c.name.c_str(), B, *std::max_element(c.lens.begin(), c.lens.end()), us,
              static_cast<long long>(kv_bytes), gbps, gbps / copy_gbps, plan.chunk_tokens, plan.items.size(), plan_us,
              plan.launch.ctas_per_sm, plan.launch.stages, plan.launch.kv_heads_per_cta, graph_us, legacy_us);
  std::fflush(stdout);
  const int max_len = *std::max_element(c.lens.begin(), c.lens.end());
  result.add(std::string(ds::dtype_name(t)) + " " + c.name + " B" + std::to_string(B) + " ctx" + std::to_string(max_len),
             static_cast<double>(us), "us",
             {{"type", std::string(ds::dtype_name(t))}, {"case", c.name}, {"batch", B}, {"context", max_len},
              {"kv_bytes", static_cast<long long>(kv_bytes)}, {"gb_per_s", gbps}, {"of_copy_bw", gbps / copy_gbps},
              {"graph_us", static_cast<double>(graph_us)}, {"legacy_stream_us", static_cast<double>(legacy_us)},
              {"chunk_tokens", plan.chunk_tokens}});
  if (!trace_path.empty() && dev.kernel == dc::DecodeKernel::tensor_core) {
    const int64_t ctas = int64_t{plan.launch.blocks_per_item(g_kv_heads)} * static_cast<int64_t>(plan.items.size());
    uint64_t* d_trace = nullptr;
    DS_GPU_CHECK(gpuMalloc(reinterpret_cast<void**>(&d_trace), static_cast<size_t>(ctas) * 16 * 8));
    DS_GPU_CHECK(gpuMemsetAsync(d_trace, 0, static_cast<size_t>(ctas) * 16 * 8, xs));
    auto traced = [&](int i) {
      q.block_table = d_table + static_cast<size_t>(i % copies) * B * max_blocks;
      dc::paged_attention_decode_traced(pools, q, ws, opts, d_trace, xs);
    };
    const float traced_us = median_us(traced, 1, xs);
    std::vector<uint64_t> h(static_cast<size_t>(ctas) * 16);
    DS_GPU_CHECK(gpuMemcpy(h.data(), d_trace, h.size() * 8, gpuMemcpyDeviceToHost));
    gpuFree(d_trace);
    uint64_t t0 = ~uint64_t{0};
    for (int64_t i = 0; i < ctas; ++i) t0 = std::min(t0, h[static_cast<size_t>(i) * 16]);
    if (FILE* f = std::fopen(trace_path.c_str(), "w")) {
      std::fprintf(f, "# %s %s B=%d chunk=%d event_us=%.2f\n", std::string(ds::dtype_name(t)).c_str(),
                   c.name.c_str(), B, plan.chunk_tokens, traced_us);
      std::fprintf(f, "block,smid,start_ns,end_ns,first_tile_cyc,loop_cyc,total_cyc,tokens,item_cyc,table_cyc,q_cyc,"
                      "reduced_cyc,issued_cyc,second_tile_cyc,q_landed_cyc\n");
      for (int64_t i = 0; i < ctas; ++i) {
        const uint64_t* r = &h[static_cast<size_t>(i) * 16];
        auto cyc = [&](int k) { return static_cast<unsigned long long>(r[k] - r[2]); };
        std::fprintf(f, "%lld,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n", static_cast<long long>(i),
                     static_cast<unsigned long long>(r[1]), static_cast<unsigned long long>(r[0] - t0),
                     static_cast<unsigned long long>(r[6] - t0), cyc(3), cyc(4), cyc(5),
                     static_cast<unsigned long long>(r[7]), cyc(8), cyc(9), cyc(10), cyc(11), cyc(12), cyc(13), cyc(14));
      }
      std::fclose(f);
    }
    trace_path.clear();  // one trace per program run
  }
  DS_GPU_CHECK(cudaStreamDestroy(xs));
  gpuFree(pools.k);
  gpuFree(pools.v);
  gpuFree(d_table);
  gpuFree(d_lens);
  gpuFree(d_q);
  gpuFree(d_out);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<DType> types{DType::bf16, DType::q8_0, DType::q4_0};
    int iters = 30;
    bool quick = false;
    int only_b = 0, only_l = 0;  // --case B,L (L = 0: the ragged batch)
    dc::DecodeOptions forced;
    std::string trace_path;
    bool shuffle = true;
    std::string json_path;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--types" && i + 1 < argc) {
        types.clear();
        std::string s = argv[++i];
        size_t pos = 0;
        while (pos <= s.size()) {
          const size_t e = std::min(s.find(',', pos), s.size());
          types.push_back(ds::parse_dtype(s.substr(pos, e - pos)));
          pos = e + 1;
        }
      } else if (a == "--iters" && i + 1 < argc) {
        iters = std::atoi(argv[++i]);
      } else if (a == "--quick") {
        quick = true;
      } else if (a == "--chunk" && i + 1 < argc) {
        forced.chunk_tokens = std::atoi(argv[++i]);
      } else if (a == "--no-bulk-copies") {
        forced.bulk_copies = false;
      } else if (a == "--no-token-rows") {
        forced.token_rows = false;
      } else if (a == "--blocks-per-sm" && i + 1 < argc) {
        forced.max_blocks_per_sm = std::atoi(argv[++i]);
      } else if (a == "--token-rows-l2-promotion" && i + 1 < argc) {
        forced.token_rows_l2_promotion = std::atoi(argv[++i]);
      } else if (a == "--unchained-merge") {
        forced.chained_merge = false;
      } else if (a == "--kv-heads" && i + 1 < argc) {
        g_kv_heads = std::max(1, std::atoi(argv[++i]));
        g_q_heads = 6 * g_kv_heads;
      } else if (a == "--no-shuffle") {
        shuffle = false;
      } else if (a == "--json" && i + 1 < argc) {
        json_path = argv[++i];
      } else if (a == "--trace" && i + 1 < argc) {
        trace_path = argv[++i];
      } else if (a == "--case" && i + 1 < argc) {
        if (std::sscanf(argv[++i], "%d,%d", &only_b, &only_l) != 2) only_b = 0;
      } else {
        std::fprintf(stderr,
                     "usage: bench_paged_attention [--types bf16,q8_0,q4_0] [--iters N] [--quick] [--case B,L] [--chunk N] [--trace FILE] [--json FILE] [--no-shuffle] [--kv-heads N] [--no-bulk-copies] [--no-token-rows] "
                     "[--blocks-per-sm N] [--token-rows-l2-promotion BYTES] [--unchained-merge]\n");
        return 2;
      }
    }
    ds::bench::ResultFile result("bench_paged_attention", argc, argv);
    const double bw = copy_bandwidth_gbps();
    std::printf("copy_bw,%.0f\n", bw);
    cudaDeviceProp prop{};
    DS_GPU_CHECK(cudaGetDeviceProperties(&prop, 0));
    result.set("gpu", std::string(prop.name));
    result.set("copy_gb_per_s", bw);
    result.set("heads", std::to_string(g_q_heads) + "/" + std::to_string(g_kv_heads));
    std::vector<Case> cases;
    for (int B : {1, 8, 32})
      for (int L : {4096, 32768, 131072}) {
        if (quick && (B == 32 || L == 131072) && !(B == 1 && L == 131072)) continue;
        cases.push_back({"uniform", std::vector<int32_t>(B, L)});
      }
    Case ragged{"ragged", {131072}};
    for (int i = 0; i < 7; ++i) ragged.lens.push_back(8192);
    cases.push_back(ragged);
    if (only_b > 0) {  // one case only (for profiling)
      std::vector<Case> keep;
      for (const Case& c : cases)
        if ((only_l == 0 && c.name == "ragged") ||
            (c.name == "uniform" && static_cast<int>(c.lens.size()) == only_b && c.lens[0] == only_l))
          keep.push_back(c);
      cases = keep;
    }
    for (DType t : types) {
      for (const Case& c : cases) run_case(t, c, iters, bw, forced, trace_path, shuffle, result);
      int64_t paged = 0;
      for (int32_t L : ragged.lens) paged += (L + kBlock - 1) / kBlock * kBlock;
      const int64_t per_tok = int64_t{g_kv_heads} * 2 * ds::row_bytes(t, kDim);
      std::printf("mem,%s,ragged,%lld,%lld\n", std::string(ds::dtype_name(t)).c_str(),
                  static_cast<long long>(paged * per_tok),
                  static_cast<long long>(int64_t{131072} * static_cast<int64_t>(ragged.lens.size()) * per_tok));
    }
    result.write(json_path);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_paged_attention: %s\n", e.what());
    return 1;
  }
}
