// bench_cuda_model: whole-model throughput of the CUDA backend, each figure next to its floor.
//
//   bench_cuda_model --model DIR [--batches 1,8,32,64] [--contexts 1024,8192] [--prefill 4096]
//                    [--prefill-reps 6] [--steps 10] [--layouts paged,contiguous] [--layout-batch 8]
//                    [--no-chained-launches] [--no-gemv] [--no-skinny-gemm] [--fused-projection-rows N]
//                    [--no-decode-bulk-copies] [--no-token-rows] [--quantization fp8] [--fp8-skinny-rows N]
//                    [--no-fp8-block-gemm] [--no-fp8-decode-tiles]
//                    [--no-fp8-weights] [--no-int4-weights] [--int4-skinny-rows N] [--graphs on,off]
//                    [--verify-rows K]
//                    [--json FILE]
//
// First it measures the GPU's ceilings (device_ceilings.h). Then:
//  * prefill: one sequence of --prefill tokens in one step (logits for its last token),
//    --prefill-reps times (6) on fresh state slots, each time printed; tokens/s from the
//    median of all but the first (a warm-up), against the FLOP floor
//    (2 x weights used x tokens + causal attention, over the measured bf16 GEMM rate).
//  * decode: max(batches) sequences are prefilled to max(contexts) tokens (8192-token steps;
//    that rate is reported too), with blocks handed out in shuffled order as in a long-running
//    server. A decode run at batch B and context L uses B of them through tables that share
//    their first L tokens' blocks (plus a fresh block for the new tokens), so every context
//    is real K/V and real state. Each step is one forward of B single-token rows (logits for
//    each) followed by a synchronise, as the engine's step is. Tokens/s from the mean of
//    --steps steps after 3 warm-up steps, against the bytes floor (the weights as stored +
//    K/V of the context + DeltaNet state read and written, over the measured copy bandwidth).
//  * --quantization fp8 loads a bf16 checkpoint as the server's flag does (an FP8 checkpoint
//    loads as FP8 without it): the linear weights stay FP8 on the device, so the bytes floor is
//    that of the FP8 codes and scales. A GPTQ or AWQ checkpoint loads 4-bit (no flag needed),
//    and its bytes floor is that of the int4 codes with their group scales and zeros (4.3 bits
//    a weight at group size 128). The device memory the weights took is printed.
//  * layouts: the same decode at --layout-batch x max(contexts) with each sequence's blocks
//    shuffled over the pool (paged) or consecutive (contiguous: one region per sequence).
//  * --verify-rows K: each decode step is a speculative verify step instead: every sequence
//    feeds 1 + K rows (logits for each, the state after each of the first K in spare slots,
//    as the scheduler plans a verify chunk), so its time sets against plain decode's at the
//    same batch (rates count one row a sequence a step). The floor adds the rows' logits and
//    the K row states written.
//  * --graphs: the decode points with recorded steps (CUDA graphs, Model::enable_step_graphs,
//    as the engine runs them: "on", the default) and/or every step eager ("off"); with both,
//    a table of the two side by side.
// The --no-* flags and --fused-projection-rows force a kernel path (CudaBackendOptions) so a
// run can compare it with what production chooses.
// Output: one line per measurement, then a markdown table; with --json FILE the table's rows as
// a result file (programs/bench_result/result_file.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "kernels/cuda/cuda_backend.h"
#include "programs/bench_cuda_model/bench_util.h"
#include "programs/bench_result/result_file.h"
#include "programs/bench_cuda_model/device_ceilings.h"
#include "kernels/cuda/op_profiler.h"
#include "kvcache/block_pool.h"
#include "kvcache/state_pool.h"
#include "model/qwen35/model.h"

using namespace ds;
using Clock = std::chrono::steady_clock;

namespace {

// Bytes of the weights a decode step streams, as uploaded (FP8 codes with their scales, int4
// codes with their f32 scales and u8 zeros per group): all but the embedding, whose rows are
// gathered (lm_head is streamed, tied or not).
double streamed_weight_bytes(const qwen35::ModelWeights& w) {
  const auto bytes = [](const kernels::Tensor& t) {
    if (t.empty()) return 0.0;
    double b = static_cast<double>(t.bytes());
    if (t.dtype() == DType::fp8_e4m3) b += 4.0 * static_cast<double>(t.fp8_scales().rows_for(t.dim(0)) * t.fp8_scales().cols);
    if (t.dtype() == DType::int4) b += 5.0 * static_cast<double>(t.numel() / t.int4_groups().group_size);
    return b;
  };
  double sum = bytes(w.lm_head) + bytes(w.final_norm);
  for (const auto& L : w.layers)
    for (const kernels::Tensor* t : {&L.input_norm, &L.post_norm, &L.attn.qkv_proj, &L.attn.o_proj, &L.attn.q_norm,
                                     &L.attn.k_norm, &L.deltanet.in_proj, &L.deltanet.in_proj_ba, &L.deltanet.conv1d,
                                     &L.deltanet.dt_bias, &L.deltanet.a_log, &L.deltanet.norm, &L.deltanet.out_proj,
                                     &L.gate_up, &L.down})
      sum += bytes(*t);
  return sum;
}

// Parameters per token of the FLOP floor (the embedding rows are gathered, not multiplied).
double weight_params(const qwen35::ModelConfig& c) {
  const double H = c.hidden_size, D = c.head_dim;
  const double attn = 2.0 * c.num_heads * D * H + 2.0 * c.num_kv_heads * D * H + c.num_heads * D * H;
  const double deltanet = static_cast<double>(c.conv_dim()) * H + static_cast<double>(c.deltanet_value_dim()) * H +
                     2.0 * c.deltanet_v_heads * H + H * static_cast<double>(c.deltanet_value_dim());
  const double mlp = 3.0 * c.intermediate_size * H;
  return c.num_full_layers() * attn + c.num_deltanet_layers() * deltanet + c.num_layers * mlp +
         static_cast<double>(c.vocab_size) * H;
}

struct Row {
  std::string what;
  double tokens_per_s = 0;
  double floor_tokens_per_s = 0;
  std::string floor_kind;
};

// n random adapters of rank r on every projection the model has, one per LoRA slot (values
// small enough to keep the activations finite; the step's cost does not depend on them).
void install_random_loras(qwen35::Model& model, int32_t n, int64_t r) {
  const auto& cfg = model.config();
  model.enable_lora(n, r);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.01f, 0.01f);
  for (int32_t slot = 0; slot < n; ++slot) {
    qwen35::LoraAdapter a;
    a.source = "bench adapter " + std::to_string(slot);
    for (int64_t l = 0; l < cfg.num_layers; ++l)
      for (int t = 0; t < qwen35::kNumLoraTargets; ++t) {
        const auto target = static_cast<qwen35::LoraTarget>(t);
        if (!model.lora_slots()->site(l, target)) continue;
        const qwen35::LoraTargetShape sh = qwen35::lora_target_shape(cfg, target);
        qwen35::LoraModule m{l, target, r, std::vector<float>(static_cast<size_t>(r * sh.in)),
                             std::vector<float>(static_cast<size_t>(sh.out * r))};
        for (float& v : m.a) v = u(rng);
        for (float& v : m.b) v = u(rng);
        a.modules.push_back(std::move(m));
      }
    model.install_lora(slot, a);
  }
  std::printf("LoRA: %d random adapters of rank %lld on every projection (%.1f MiB of slots)\n", n,
              static_cast<long long>(r), static_cast<double>(model.lora_slots()->bytes()) / (1 << 20));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Whole-model prefill and decode throughput of the CUDA backend, with floors."};
  std::string model_dir, batches_s = "1,8,32,64", contexts_s = "1024,8192", layouts_s = "paged,contiguous";
  int64_t prefill = 4096, steps = 10, layout_batch = 8;
  int prefill_reps = 6;
  bool profile = false;
  int64_t lora_adapters = 0, lora_rank = 16;
  std::string kv_dtype = "bf16", quantization = "none", state_dtype = "f32";
  app.add_option("--model", model_dir, "checkpoint directory")->required();
  app.add_option("--batches", batches_s, "decode batch sizes");
  app.add_option("--contexts", contexts_s, "decode context lengths");
  app.add_option("--prefill", prefill, "prefill prompt length (0 = skip)");
  app.add_option("--prefill-reps", prefill_reps,
                 "prefill prompts run; tokens/s from the median of those after the first (a warm-up)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--steps", steps, "timed decode steps per point")->check(CLI::PositiveNumber);
  int64_t verify = 0;
  app.add_option("--verify-rows", verify,
                 "decode steps shaped as speculative verify chunks: each sequence feeds 1 + K rows, all sampled, "
                 "with K row states (0: plain decode)")
      ->check(CLI::Range(0, 15));
  app.add_option("--layouts", layouts_s, "layout comparison: paged,contiguous (empty = skip)");
  app.add_option("--layout-batch", layout_batch, "batch of the layout comparison");
  app.add_option("--kv-cache-dtype", kv_dtype, "K/V cache type: bf16 (default), f16, q8_0, q4_0")
      ->check(CLI::IsMember({"bf16", "f16", "q8_0", "q4_0"}));
  app.add_option("--mamba-ssm-cache-dtype", state_dtype, "the DeltaNet recurrent state's type: f32 (default) or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  cuda::CudaBackendOptions bo;
  bool no_chain = false, no_gemv = false, no_skinny = false, no_bulk = false, no_rows = false;
  app.add_flag("--no-chained-launches", no_chain, "plain launches instead of programmatic dependent ones");
  app.add_flag("--no-gemv", no_gemv, "one-row GEMMs on cuBLAS instead of gemv.cu");
  app.add_flag("--no-skinny-gemm", no_skinny, "2-8-row GEMMs on cuBLAS instead of skinny_gemm.cu");
  bool no_fp8_weights = false;
  app.add_flag("--no-fp8-weights", no_fp8_weights, "FP8 weights dequantised to bf16 at load (the backend's fp8_weights off)");
  app.add_option("--fp8-skinny-rows", bo.paths.fp8_skinny_rows,
                 "FP8 GEMMs of up to this many rows (<= 64) by fp8_gemm.cu's skinny kernel, larger by the "
                 "block-scaled FP8 GEMM (or cuBLAS over dequantised tiles)");
  bool no_int4_weights = false;
  app.add_flag("--no-int4-weights", no_int4_weights,
               "4-bit (GPTQ / AWQ) weights dequantised to bf16 at load (the backend's int4_weights off): the same "
               "weights at bf16's bytes and kernels");
  app.add_option("--int4-skinny-rows", bo.paths.int4_skinny_rows,
                 "4-bit GEMMs of up to this many rows (<= 64) by int4_gemm.cu's code-reading kernel, larger by cuBLAS "
                 "over bf16 tiles")
      ->check(CLI::Range(0, 64));
  bool fp8_warp_gemv = false, no_fp8_block_gemm = false, no_fp8_decode_tiles = false;
  app.add_flag("--no-fp8-decode-tiles", no_fp8_decode_tiles,
               "block-scaled FP8 GEMMs of up to 64 rows on cuBLASLt's heuristic's tiles instead of the decode tiles");
  app.add_flag("--no-fp8-block-gemm", no_fp8_block_gemm,
               "FP8 GEMMs above the skinny range by cuBLAS over dequantised bf16 tiles instead of the block-scaled "
               "FP8 GEMM (activations quantised)");
  app.add_flag("--fp8-warp-gemv", fp8_warp_gemv,
               "one-row FP8 GEMMs on the warp-per-row GEMV instead of fp8_gemm.cu's tensor-core kernel");
  app.add_option("--fused-projection-rows", bo.paths.fused_projection_rows,
                 "steps of at most this many rows run stacked projections as one GEMM (0 = never)");
  app.add_flag("--no-decode-bulk-copies", no_bulk, "decode K/V tiles by cp.async instead of bulk tensor copies");
  app.add_flag("--no-token-rows", no_rows, "decode never uses token-row tiles (a block per KV head)");
  app.add_option("--quantization", quantization,
                 "none; fp8: quantise the linear weights at load (FP8 on the device); gptq or awq: the checkpoint "
                 "must be one (it loads 4-bit without the flag)")
      ->check(CLI::IsMember({"none", "fp8", "gptq", "awq"}));
  std::string graphs_s = "on";
  app.add_option("--graphs", graphs_s, "decode with recorded steps (CUDA graphs): on, off, or on,off (both, compared)");
  app.add_option("--lora-adapters", lora_adapters,
                 "random LoRA adapters on every target (rank --lora-rank), one per slot; decode rows take them in "
                 "turn (row i: slot i % N) and prefill steps the first");
  app.add_option("--lora-rank", lora_rank, "rank of the --lora-adapters");
  app.add_flag("--profile", profile, "after each timed point, per-op GPU times of one more run (prefill) or 3 steps");
  std::string json_path;
  app.add_option("--json", json_path, "also write the measurements to FILE as JSON (bench/README.md)");
  CLI11_PARSE(app, argc, argv);
  bench::ResultFile result("bench_cuda_model", argc, argv);
  if (lora_adapters < 0 || lora_rank < 1) return std::fprintf(stderr, "--lora-adapters >= 0, --lora-rank >= 1\n"), 2;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines survive a timeout
  const auto batches = bench::parse_list(batches_s), contexts = bench::parse_list(contexts_s);
  std::vector<bool> graph_modes;
  for (size_t a = 0; a <= graphs_s.size();) {
    const size_t b = std::min(graphs_s.find(',', a), graphs_s.size());
    const std::string m = graphs_s.substr(a, b - a);
    if (m != "on" && m != "off") return std::fprintf(stderr, "--graphs: on, off or on,off\n"), 2;
    graph_modes.push_back(m == "on");
    a = b + 1;
  }
  const bool layouts = !layouts_s.empty() && layout_batch > 0;
  // The decode points share whole blocks of the prefilled sequences' context.
  for (int64_t v : batches)
    if (v < 1) return std::fprintf(stderr, "--batches: sizes must be >= 1\n"), 2;
  for (int64_t v : contexts)
    if (v < 16 || v % 16 != 0) return std::fprintf(stderr, "--contexts: lengths must be multiples of 16\n"), 2;
  if (prefill < 0 || steps < 1 || layout_batch < 0)
    return std::fprintf(stderr, "--prefill >= 0, --steps >= 1 and --layout-batch >= 0, please\n"), 2;

  try {
    const auto ceil = cuda::measure_device_ceilings();
    std::printf("gpu %s, %d SMs: copy %.0f GB/s (read+write), bf16 GEMM %.0f TFLOP/s\n", ceil.gpu.c_str(), ceil.sm_count,
                ceil.copy_bytes_per_s / 1e9, ceil.bf16_flops / 1e12);
    result.set("gpu", ceil.gpu);
    result.set("copy_gb_per_s", ceil.copy_bytes_per_s / 1e9);
    result.set("bf16_tflop_per_s", ceil.bf16_flops / 1e12);

    bo.kv_dtype = parse_dtype(kv_dtype);
    bo.recurrent_state_dtype = parse_dtype(state_dtype);
    bo.paths.chained_launches = !no_chain;
    bo.paths.gemv = !no_gemv;
    bo.paths.fp8_tensor_core_gemv = !fp8_warp_gemv;
    bo.paths.fp8_block_gemm = !no_fp8_block_gemm;
    bo.paths.fp8_decode_tiles = !no_fp8_decode_tiles;
    bo.paths.skinny_gemm = !no_skinny;
    bo.fp8_weights = !no_fp8_weights;
    bo.int4_weights = !no_int4_weights;
    bo.decode.bulk_copies = !no_bulk;
    bo.decode.token_rows = !no_rows;
    auto backend = cuda::make_cuda_backend(bo);
    // --profile loads the model on the op profiler (a wrapper that forwards every op), so its
    // timed runs pay one more call and check per op; without it nothing is wrapped.
    std::unique_ptr<cuda::OpProfiler> profiler;
    if (profile) profiler = std::make_unique<cuda::OpProfiler>(*backend);
    kernels::Backend& be = profiler ? static_cast<kernels::Backend&>(*profiler) : *backend;
    const auto t_load = Clock::now();
    const auto free_before = be.device_memory().free_bytes;
    qwen35::LoadOptions load;
    load.quantization = qwen35::parse_quantization(quantization);
    auto model = qwen35::Model::load(be, model_dir, load);
    be.synchronize();
    const auto& cfg = model->config();
    std::printf("loaded %s in %.1f s: %lld layers, hidden %lld, vocab %lld\n", model_dir.c_str(),
                std::chrono::duration<double>(Clock::now() - t_load).count(), static_cast<long long>(cfg.num_layers),
                static_cast<long long>(cfg.hidden_size), static_cast<long long>(cfg.vocab_size));
    if (lora_adapters > 0) install_random_loras(*model, static_cast<int32_t>(lora_adapters), lora_rank);
    // The slot row i of a step applies (-1: none).
    auto lora_of = [&](int64_t i) { return lora_adapters > 0 ? static_cast<int32_t>(i % lora_adapters) : -1; };
    const auto geo = model->cache_geometry();
    const double wbytes = streamed_weight_bytes(model->weights());
    std::printf("weights: %.2f GiB of device memory (--quantization %s, FP8 kept: %s, %s); %.2f GB streamed per decode step\n",
                static_cast<double>(free_before - be.device_memory().free_bytes) / (1 << 30), quantization.c_str(),
                be.fp8_weights() ? "yes" : "no",
                cfg.int4 ? (std::string(cfg.int4->method_name()) + " checkpoint, 4-bit kept: " +
                            (be.int4_weights() ? "yes" : "no")).c_str()
                         : "not 4-bit",
                wbytes / 1e9);
    result.set("model", model_dir);
    result.set("weights_gib", static_cast<double>(free_before - be.device_memory().free_bytes) / (1 << 30));
    result.set("weight_format", cfg.int4 ? std::string(cfg.int4->method_name()) + " int4"
                                : (be.fp8_weights() && (cfg.fp8 || quantization == "fp8")) ? "fp8" : "bf16");
    const double kv_token = static_cast<double>(geo.kv_bytes_per_token());
    const double state_slot = static_cast<double>(geo.state_bytes_per_slot());

    const int32_t bs = 16;
    const int64_t max_b = batches.empty() ? 0 : *std::max_element(batches.begin(), batches.end());
    const int64_t max_l = contexts.empty() ? 0 : *std::max_element(contexts.begin(), contexts.end());
    const int64_t rows_per_seq = 1 + verify;  // a decode step's rows per sequence
    // A contiguous sequence grows inside its own run of blocks: room for the timed and warm-up
    // steps' rows (a verify step adds 1 + K).
    const int64_t per_seq_blocks = (max_l + (steps + 6) * rows_per_seq + bs - 1) / bs + 1;
    // The paged layout point decodes layout_batch of the paged sequences: prefill enough of them.
    const int64_t n_paged = std::max<int64_t>(max_b, layouts ? layout_batch : 0);
    const int64_t n_long = n_paged + (layouts ? layout_batch : 0);
    const int64_t prefill_blocks = 3 * ((prefill + bs - 1) / bs);
    const int64_t decode_blocks =
        std::max<int64_t>(n_paged, layout_batch) * (((steps + 6) * rows_per_seq + bs - 1) / bs + 1) + 8;
    kvcache::PoolSizes sizes;
    sizes.block_size = bs;
    sizes.num_blocks = static_cast<int32_t>(n_long * per_seq_blocks + prefill_blocks + decode_blocks);
    sizes.num_slots = static_cast<int32_t>(n_long + 4 + max_b * verify);  // + the verify steps' row states
    model->allocate_cache(sizes);
    std::printf("cache: %d blocks (%.1f GiB K/V), %d state slots (%.1f GiB)\n", sizes.num_blocks,
                sizes.num_blocks * bs * kv_token / (1 << 30), sizes.num_slots, sizes.num_slots * state_slot / (1 << 30));
    kvcache::BlockPool blocks(sizes.num_blocks, bs);
    kvcache::StatePool slots(sizes.num_slots, geo.state, model->state_zero_fn());
    std::mt19937 rng(1);
    auto random_tokens = [&](int64_t n) {
      std::vector<int32_t> t(static_cast<size_t>(n));
      for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(std::min<int64_t>(cfg.vocab_size, 200000)));
      return t;
    };
    // One reservation per block: consecutive ids first (contiguous sequences take from the
    // front), the rest shuffled.
    std::vector<kvcache::Reservation> all;
    for (int32_t b = 0; b < sizes.num_blocks; ++b) all.push_back(std::move(*blocks.reserve(1)));
    std::sort(all.begin(), all.end(), [](const kvcache::Reservation& x, const kvcache::Reservation& y) {
      return x.blocks()[0].id > y.blocks()[0].id;  // descending: pop_back yields ascending ids
    });
    const int64_t contiguous_blocks = layouts ? layout_batch * per_seq_blocks : 0;
    std::vector<kvcache::Reservation> ordered, shuffled;
    for (int64_t i = 0; i < static_cast<int64_t>(all.size()); ++i)
      (i >= static_cast<int64_t>(all.size()) - contiguous_blocks ? ordered : shuffled).push_back(std::move(all[static_cast<size_t>(i)]));
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(2));
    auto grow = [&](kvcache::BlockTable& t, int64_t n, std::vector<kvcache::Reservation>& from) {
      for (int32_t k = t.blocks_needed(n); k > 0; --k) {
        if (from.empty()) throw std::runtime_error("bench: out of blocks");
        blocks.commit(from.back(), t);
        from.pop_back();
      }
    };
    // Frees a table and takes its blocks back into `from` (the pool's free list is not `from`).
    auto release = [&](kvcache::BlockTable& t, std::vector<kvcache::Reservation>& from) {
      const int32_t before = blocks.num_free();
      blocks.free_table(t);
      for (int32_t k = blocks.num_free() - before; k > 0; --k) from.push_back(std::move(*blocks.reserve(1)));
    };
    std::vector<Row> rows;

    // ---- prefill
    auto prefill_flops = [&](int64_t T, int64_t cached) {
      const double attn = 4.0 * static_cast<double>(cfg.num_heads * cfg.head_dim) *
                          (static_cast<double>(T) * cached + 0.5 * static_cast<double>(T) * (T + 1)) *
                          static_cast<double>(cfg.num_full_layers());
      return 2.0 * (weight_params(cfg) - static_cast<double>(cfg.vocab_size) * cfg.hidden_size) * T +
             2.0 * static_cast<double>(cfg.vocab_size) * cfg.hidden_size + attn;
    };
    if (prefill > 0) {
      std::vector<double> times;
      for (int rep = 0; rep < prefill_reps; ++rep) {
        kvcache::BlockTable t(bs);
        auto slot = slots.acquire();
        grow(t, prefill, shuffled);
        const auto tok = random_tokens(prefill);
        qwen35::ForwardBatch batch;
        batch.seqs.push_back({tok, 0, t.block_ids(), slot->id, 1});
        batch.seqs.back().lora_slot = lora_of(0);
        be.synchronize();
        const auto t0 = Clock::now();
        model->forward(batch);
        be.synchronize();
        times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        std::printf("prefill %lld tokens: %.1f ms\n", static_cast<long long>(prefill), times.back() * 1e3);
        release(t, shuffled);
        slots.release(*slot);
      }
      if (profile) {
        kvcache::BlockTable t(bs);
        auto slot = slots.acquire();
        grow(t, prefill, shuffled);
        const auto tok = random_tokens(prefill);
        qwen35::ForwardBatch batch;
        batch.seqs.push_back({tok, 0, t.block_ids(), slot->id, 1});
        batch.seqs.back().lora_slot = lora_of(0);
        profiler->set_enabled(true);
        model->forward(batch);
        std::printf("profile: prefill %lld tokens\n%s", static_cast<long long>(prefill), profiler->report().c_str());
        profiler->set_enabled(false);
        release(t, shuffled);
        slots.release(*slot);
      }
      // The first prompt also pays for first-use work (cuBLAS plans, kernel loading); the
      // others still spread by a few percent as the GPU's power cap lowers its clock under
      // sustained tensor-core load (docs/bench-log, "Power capping and the prefill floor").
      if (times.size() > 1) times.erase(times.begin());
      std::sort(times.begin(), times.end());
      const double tps = static_cast<double>(prefill) / times[times.size() / 2];
      const double floor_s = prefill_flops(prefill, 0) / ceil.bf16_flops;
      rows.push_back({"prefill 1 x " + std::to_string(prefill), tps, static_cast<double>(prefill) / floor_s, "FLOP"});
    }

    // ---- long sequences for decode: n_paged paged, layout_batch contiguous
    struct Long {
      kvcache::BlockTable table{16};
      kvcache::SlotHandle slot;
    };
    std::vector<Long> paged(static_cast<size_t>(n_paged)), contiguous(static_cast<size_t>(layouts ? layout_batch : 0));
    double fill_s = 0;
    int64_t fill_tokens = 0;
    auto fill = [&](Long& s, std::vector<kvcache::Reservation>& from) {
      s.slot = *slots.acquire();
      grow(s.table, max_l, from);
      for (int64_t pos = 0; pos < max_l;) {
        const int64_t n = std::min<int64_t>(8192, max_l - pos);
        const auto tok = random_tokens(n);
        qwen35::ForwardBatch batch;
        batch.seqs.push_back({tok, pos, s.table.block_ids(), s.slot.id, 1});
        const auto t0 = Clock::now();
        model->forward(batch);
        be.synchronize();
        fill_s += std::chrono::duration<double>(Clock::now() - t0).count();
        fill_tokens += n;
        s.table.append_tokens(n);
        pos += n;
      }
    };
    for (auto& s : paged) fill(s, shuffled);
    for (auto& s : contiguous) fill(s, ordered);
    if (fill_tokens > 0) {
      std::printf("prefilled %lld tokens in steps of <= 8192: %.0f tokens/s\n", static_cast<long long>(fill_tokens),
                  fill_tokens / fill_s);
      rows.push_back({"prefill " + std::to_string(max_l) + "-token steps", fill_tokens / fill_s,
                      static_cast<double>(std::min<int64_t>(max_l, 8192)) * ceil.bf16_flops /
                          prefill_flops(std::min<int64_t>(max_l, 8192), 0),
                      "FLOP"});
    }

    // ---- decode
    auto decode = [&](std::vector<Long>& base, int64_t B, int64_t L, std::vector<kvcache::Reservation>& from,
                      const std::string& label) {
      std::vector<kvcache::BlockTable> views;
      views.reserve(static_cast<size_t>(B));
      const int64_t shared = L / bs;  // whole blocks of context (L is a multiple of 16 here)
      for (int64_t i = 0; i < B; ++i) {
        views.emplace_back(bs);
        const auto& hs = base[static_cast<size_t>(i)].table.blocks();
        for (int64_t b = 0; b < shared; ++b) blocks.share(hs[static_cast<size_t>(b)], views.back());
        views.back().append_tokens(shared * bs);
        grow(views.back(), (steps + 6) * rows_per_seq, from);
      }
      // A verify step's row states: K spare slots a sequence, as the scheduler gives a verify
      // chunk (the state after each of its first K rows).
      std::vector<kvcache::SlotHandle> spare;
      std::vector<int32_t> row_states(static_cast<size_t>(B * verify));
      for (auto& r : row_states) {
        spare.push_back(*slots.acquire());
        r = spare.back().id;
      }
      const std::string full_label = verify ? label + " verify" + std::to_string(verify) : label;
      double total = 0, enqueue = 0;
      const int64_t prof_steps = profile ? 3 : 0;
      for (int64_t s = 0; s < steps + 3 + prof_steps; ++s) {
        if (s == steps + 3) profiler->set_enabled(true);
        const auto tok = random_tokens(B * rows_per_seq);
        qwen35::ForwardBatch batch;
        for (int64_t i = 0; i < B; ++i) {
          const auto u = static_cast<size_t>(i);
          batch.seqs.push_back({std::span<const int32_t>(&tok[u * rows_per_seq], rows_per_seq), views[u].num_tokens(),
                                views[u].block_ids(), base[u].slot.id, static_cast<int32_t>(rows_per_seq),
                                std::span<const int32_t>(&row_states[u * verify], verify)});
        }
        for (int64_t i = 0; i < B; ++i) batch.seqs[static_cast<size_t>(i)].lora_slot = lora_of(i);
        const auto t0 = Clock::now();
        model->forward(batch);
        const auto t1 = Clock::now();
        be.synchronize();
        if (s >= 3 && s < steps + 3) {
          total += std::chrono::duration<double>(Clock::now() - t0).count();
          enqueue += std::chrono::duration<double>(t1 - t0).count();
        }
        for (auto& v : views) v.append_tokens(rows_per_seq);
      }
      if (profile) {
        std::printf("profile: decode %s batch %lld context %lld, %lld steps\n%s", full_label.c_str(), static_cast<long long>(B),
                    static_cast<long long>(L), static_cast<long long>(prof_steps), profiler->report().c_str());
        profiler->set_enabled(false);
      }
      const double step_s = total / static_cast<double>(steps);
      // The weights once; per sequence its context's K/V read and its rows' written, the state
      // read and written after the last row and after each of the first K (a verify step's row
      // states), and the logits of every row.
      const auto n = static_cast<double>(rows_per_seq);
      const double bytes = wbytes +
                           static_cast<double>(B) * ((static_cast<double>(L) + n) * kv_token + (1 + n) * state_slot) +
                           static_cast<double>(B) * n * cfg.vocab_size * 4;
      const double floor_s = bytes / ceil.copy_bytes_per_s;
      // A verify step's rate counts steps x sequences (one row of each, as plain decode's), so
      // its rows are compared with plain decode's at the same batch step for step.
      std::printf("decode %s batch %lld context %lld: %.2f ms/step, %.0f tokens/s; floor %.2f ms (%.1f GB/step), %.0f%% of it"
                  " (forward() returns after %.2f ms)\n",
                  full_label.c_str(), static_cast<long long>(B), static_cast<long long>(L), step_s * 1e3, B / step_s,
                  floor_s * 1e3, bytes / 1e9, 100.0 * floor_s / step_s, enqueue / static_cast<double>(steps) * 1e3);
      std::fflush(stdout);
      rows.push_back({"decode " + full_label + " b" + std::to_string(B) + " ctx" + std::to_string(L), B / step_s,
                      B / floor_s, "bytes"});
      // The fresh blocks go back to where they came from (the shared ones stay with the base).
      for (auto& v : views) release(v, from);
      for (auto& l : spare) slots.release(l);
    };
    // tokens/s per (graphs, batch, context), for the side-by-side table.
    std::map<std::tuple<bool, int64_t, int64_t>, double> by_mode;
    for (bool graphs : graph_modes) {
      if (graphs)
        model->enable_step_graphs(
            {.max_seq_len = max_l + (steps + 16) * rows_per_seq, .max_batch = static_cast<int32_t>(max_b)});
      else
        model->disable_step_graphs();
      for (int64_t L : contexts)
        for (int64_t B : batches) {
          // (--profile's wrapper records no steps: its points are eager either way.)
          decode(paged, B, L, shuffled, model->step_graphs_enabled() ? "paged graphs" : "paged eager");
          by_mode[{graphs, B, L}] = rows.back().tokens_per_s;
        }
      if (graphs) {
        const auto st = model->step_graph_stats();
        std::printf("step graphs: %lld replayed, %lld recorded, %lld padded eager, %lld failed\n",
                    static_cast<long long>(st.replayed), static_cast<long long>(st.recorded),
                    static_cast<long long>(st.padded_eager), static_cast<long long>(st.failed));
      }
    }
    if (layouts) {
      decode(paged, layout_batch, max_l, shuffled, "paged");
      decode(contiguous, layout_batch, max_l, ordered, "contiguous");
    }

    std::printf("\n| measurement | tokens/s | floor tokens/s | of floor |\n|---|---|---|---|\n");
    for (const Row& r : rows) {
      std::printf("| %s | %.0f | %.0f (%s) | %.0f%% |\n", r.what.c_str(), r.tokens_per_s, r.floor_tokens_per_s,
                  r.floor_kind.c_str(), 100.0 * r.tokens_per_s / r.floor_tokens_per_s);
      result.add(r.what, r.tokens_per_s, "tok/s",
                 {{"floor", r.floor_kind}, {"floor_tokens_per_s", r.floor_tokens_per_s},
                  {"of_floor", r.tokens_per_s / r.floor_tokens_per_s}});
    }
    if (graph_modes.size() == 2) {
      std::printf("\n| decode batch | context | eager tokens/s | graphs tokens/s | graphs / eager |\n|---|---|---|---|---|\n");
      for (int64_t L : contexts)
        for (int64_t B : batches) {
          const double off = by_mode[{false, B, L}], on = by_mode[{true, B, L}];
          std::printf("| %lld | %lld | %.0f | %.0f | %.2f |\n", static_cast<long long>(B), static_cast<long long>(L), off,
                      on, on / off);
        }
    }
    result.write(json_path);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_model: error: %s\n", e.what());
    return 1;
  }
}
