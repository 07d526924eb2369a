#include "server/model_loader.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/sampler.h"
#ifdef DELTASERVE_HAS_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_sampler.h"
#endif
#include "model/qwen35/checkpoint.h"
#include "model/qwen35/device_budget.h"
#include "kvcache/capacity.h"
#include "scheduler/qwen35_forward_model.h"
#include "model/vision/video_decode.h"
#include "server/model_fingerprint.h"
#include "server/thinking_setup.h"

namespace ds::server {

namespace fs = std::filesystem;

namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

// Reads the checkpoint's weight files once, front to back, drawing a bar: the model maps
// them afterwards and finds them in the page cache, so the bar measures the slow part.
void read_weights_with_progress(const std::vector<fs::path>& files, bool bar) {
  int64_t total = 0;
  for (const auto& f : files) total += static_cast<int64_t>(fs::file_size(f));
  if (!bar || total == 0) return;
  std::vector<char> buf(16u << 20);
  int64_t done = 0;
  int last = -1;
  auto draw = [&](bool force) {
    const int pct = static_cast<int>(100 * done / total);
    if (pct == last && !force) return;
    last = pct;
    const int width = 30, fill = pct * width / 100;
    std::fprintf(stderr, "\rloading weights [%s%s] %3d%% %.1f/%.1f MiB", std::string(fill, '#').c_str(),
                 std::string(width - fill, '.').c_str(), pct, mib(done), mib(total));
    std::fflush(stderr);
  };
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      done += in.gcount();
      draw(false);
    }
  }
  draw(true);
  std::fprintf(stderr, "\n");
}

}  // namespace

std::string resolve_model_dir(const ServerOptions& o, const char* argv0) {
  if (!o.model.empty()) return o.model;
  const fs::path d = default_model_dir(argv0);
  if (d.empty())
    throw std::runtime_error("no --model given and the bundled model (tests/data/tiny-qwen35) was not found "
                             "next to the executable or in the current directory");
  return d.string();
}

std::string served_name(const ServerOptions& o, const std::string& model_dir) {
  if (!o.served_model_name.empty()) return o.served_model_name;
  fs::path p = fs::path(model_dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

BackendSampler make_sampler(kernels::Backend& backend) {
  BackendSampler s;
#ifdef DELTASERVE_HAS_CUDA
  if (backend.name() == "cuda") s.sampler = cuda::make_cuda_sampler(backend);
#endif
  s.device_logits = s.sampler != nullptr;
  if (!s.sampler) s.sampler = kernels::cpu::make_cpu_sampler();
  return s;
}

std::string backend_not_built(const ServerOptions& o) {
#ifndef DELTASERVE_HAS_CUDA
  if (o.backend == BackendChoice::cuda)
    return "--backend cuda: this build has no cuda backend (it was configured without CUDA). Build with CUDA "
           "(CUDA >= 12.9, an sm_90 GPU: H100 / H200): `CUDA=1 scripts/run.sh`, or `cmake -S . -B build "
           "-DDELTASERVE_CUDA=ON && cmake --build build --target serve`; or use --backend cpu";
#endif
  if (o.backend == BackendChoice::hip)
    return "--backend hip: this build has no hip backend for the model (only the HIP attention kernels exist); use "
           "--backend cpu";
  return {};
}

namespace {

// The backend --backend names (auto: cuda where the build has it and a device is present).
std::unique_ptr<kernels::Backend> make_backend(const ServerOptions& o) {
  std::unique_ptr<kernels::Backend> backend;
  const std::string name(backend_name(o.backend));
#ifdef DELTASERVE_HAS_CUDA
  if (o.backend == BackendChoice::cuda || (o.backend == BackendChoice::automatic && cuda::cuda_device_available())) {
    cuda::CudaBackendOptions co;
    if (o.kv_cache_dtype) co.kv_dtype = *o.kv_cache_dtype;
    co.recurrent_state_dtype = o.recurrent_state_dtype;
    co.fp8_weights = o.fp8_weights_resident;
    try {
      backend = cuda::make_cuda_backend(co);
    } catch (const std::invalid_argument& e) {
      const std::string kv = o.kv_cache_dtype ? std::string(dtype_name(*o.kv_cache_dtype)) : "auto";
      throw std::runtime_error("--kv-cache-dtype " + kv + ": " + e.what());
    }
  }
#endif
  if (const std::string why = backend_not_built(o); !backend && !why.empty()) throw std::runtime_error(why);
  if (!backend && o.gpu_memory_utilization)
    throw std::runtime_error("--gpu-memory-utilization sizes device memory, and --backend " + name +
                             " found no GPU backend here (cpu: use --kv-cache-memory BYTES)");
  if (!backend) backend = kernels::cpu::make_cpu_backend({.recurrent_state_dtype = o.recurrent_state_dtype});
  const DType kv_dtype = backend->kv_cache_dtype();
  if (o.kv_cache_dtype && *o.kv_cache_dtype != kv_dtype)
    throw std::runtime_error("--kv-cache-dtype " + std::string(dtype_name(*o.kv_cache_dtype)) + ": the " +
                             std::string(backend->name()) + " backend stores K/V as " +
                             std::string(dtype_name(kv_dtype)) + " (f16, bf16, q8_0 and q4_0 need the CUDA backend)");
  return backend;
}

// Tokenizer, chat template and what they say about thinking budgets: they fail fast and
// cheaply, so they come before the weights.
void load_text_assets(const ServerOptions& o, const fs::path& dir, LoadedModel& lm) {
  lm.tokenizer = std::make_unique<tok::Tokenizer>(tok::Tokenizer::load(dir.string()));
  try {
    auto tmpl = o.chat_template.empty() ? chat::ChatTemplate::from_model_dir(dir.string())
                                        : chat::ChatTemplate::from_model_dir(dir.string(), o.chat_template);
    lm.chat_template = std::make_unique<chat::ChatTemplate>(std::move(tmpl));
  } catch (const chat::TemplateSyntaxError&) {
    throw;
  } catch (const chat::TemplateError& e) {
    if (!o.chat_template.empty()) throw;
    spdlog::warn("no usable chat template ({}); /v1/chat/completions will answer 400, /v1/completions works",
                 e.what());
  }
  lm.served.thinking = make_thinking_setup(*lm.tokenizer, lm.chat_template.get(), o.default_thinking_budget,
                                           o.reasoning_effort_budgets);
  spdlog::info("{}", lm.served.thinking.describe());
  if (!lm.served.thinking.available() && (o.default_thinking_budget || !o.reasoning_effort_budgets.empty()))
    spdlog::warn("--default-thinking-budget / --reasoning-effort-budgets have no effect on this model");
}

// The checkpoint's weights onto the backend (the MTP module too when speculative decoding
// drafts with it), logged with their sizes and load time.
void load_weights(const ServerOptions& o, const fs::path& dir, bool progress_bar, LoadedModel& lm) {
  spdlog::info("loading {} on {}", dir.string(), lm.backend->name());
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t rss0 = resident_bytes();
  // The weight files are the checkpoint's own (model.safetensors or the index's shards), not
  // every .safetensors file the directory happens to hold.
  std::vector<fs::path> weight_files;
  for (const auto& name : qwen35::Checkpoint(dir).file_names()) weight_files.push_back(dir / name);
  read_weights_with_progress(weight_files, progress_bar);
  qwen35::LoadOptions load_options;
  load_options.quantization = o.quantization;
  load_options.mtp = o.speculative.method == "mtp";  // a checkpoint without the module fails here, named
  if (load_options.mtp) load_options.mtp_draft_tokens = o.speculative.draft_tokens;
  load_options.config_overrides = o.hf_overrides;
  if (!o.hf_overrides.empty()) spdlog::info("--hf-overrides: merged into config.json: {}", o.hf_overrides);
  lm.model = qwen35::Model::load(*lm.backend, dir, load_options);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t ckpt_bytes = 0;
  for (const auto& f : weight_files) ckpt_bytes += static_cast<int64_t>(fs::file_size(f));
  const auto& cfg = lm.model->config();
  const bool quantize = o.quantization == qwen35::Quantization::fp8;
  if (cfg.fp8)
    spdlog::info("FP8 checkpoint (e4m3, {}x{} blocks): weights dequantised at load{}", cfg.fp8->block_rows,
                 cfg.fp8->block_cols, quantize ? "; --quantization fp8 has nothing to do" : "");
  else if (quantize)
    spdlog::info("--quantization fp8: linear weights quantised to e4m3 in 128x128 blocks at load");
  else if (cfg.int4)
    spdlog::info("{} checkpoint (4 bits, group size {}{}): quantised weights {} at load", cfg.int4->method_name(),
                 cfg.int4->group_size, cfg.int4->desc_act ? ", act order" : "",
                 lm.backend->int4_weights() ? "kept 4-bit" : "dequantised");
  spdlog::info("weights: {} layers ({} full attention, {} DeltaNet), hidden {}, vocab {}; checkpoint {:.1f} MiB, "
               "resident {:+.1f} MiB on {}; loaded in {:.2f} s",
               cfg.num_layers, cfg.num_full_layers(), cfg.num_deltanet_layers(), cfg.hidden_size, cfg.vocab_size,
               mib(ckpt_bytes), mib(resident_bytes() - rss0), lm.backend->name(), load_s);
  if (cfg.yarn)
    spdlog::info("RoPE: yarn, factor {} over {} original positions (beta {} / {}, attention factor {:.6f}{}): "
                 "positions up to {}",
                 cfg.yarn->factor, cfg.yarn->original_max_positions, cfg.yarn->beta_fast, cfg.yarn->beta_slow,
                 cfg.yarn->attention_factor, cfg.yarn->truncate ? "" : ", untruncated", cfg.max_positions());
}

// The vision tower: loaded with its workspace for the largest encoder step before the cache
// budget is measured, so the K/V cache leaves it room. The encoder's per-step budget is
// vLLM's: the step's token budget, or one image of the largest size the processor makes when
// that is more, so every image it accepts fits a step (its prefill then runs in chunks).
// Returns that budget (SchedulerConfig::max_encoder_tokens); sets lm.served.vision_unusable
// when images are refused.
int64_t load_vision(const ServerOptions& o, const fs::path& dir, LoadedModel& lm) {
  const auto& cfg = lm.model->config();
  std::string vision_unusable = cfg.vision_unusable;
  int64_t encoder_tokens = o.max_num_batched_tokens;
  if (cfg.vision && o.language_model_only) {
    vision_unusable = "serve runs with --language-model-only";
    spdlog::info("vision tower: not loaded (--language-model-only); requests with images are refused");
  } else if (cfg.vision) {
    try {
      const auto t_vis = std::chrono::steady_clock::now();
      lm.encoder = qwen35::VisionEncoder::load(*lm.backend, dir, qwen35::Checkpoint(dir), *cfg.vision);
      auto v = std::make_unique<VisionServing>();
      v->processor = lm.encoder->processor();
      const int64_t factor = v->processor.factor();
      encoder_tokens = std::max(encoder_tokens, v->processor.max_pixels / (factor * factor));
      lm.encoder->reserve(encoder_tokens * cfg.vision->merge_unit());
      v->image_token_id = cfg.vision->image_token_id;
      v->merge_size = cfg.vision->spatial_merge_size;
      v->max_images = o.mm_per_prompt.images;
      v->media.allowed_domains = o.allowed_media_domains;
      v->media.allowed_local_path = o.allowed_local_media_path;
      v->decode.max_bytes = v->media.max_bytes;
      // Videos: the video processor's settings, and the same tower. A temporal patch is one
      // encoder item; the step budget covers the largest the processor makes, as for images.
      // A video processor that cannot be used turns video off, not the tower.
      const auto pad = lm.tokenizer->token_id("<|video_pad|>");
      if (o.mm_per_prompt.videos == 0) {
        v->video_unusable = "serve runs with --limit-mm-per-prompt video 0";
      } else if (!pad || *pad != cfg.vision->video_token_id) {
        v->video_unusable = "its tokenizer has no <|video_pad|> of config.json's video_token_id";
      } else if (const std::string why = vision::video_decoder_status(); !why.empty()) {
        v->video_unusable = why;  // FFmpeg is opened at run time, where installed
      } else try {
        v->video = vision::VideoProcessorConfig::load(dir);
        const auto& vp = v->video.image;
        // The encoder writes every item's patch rows with the image processor's layout and
        // normalisation: a video processor that differs from it is not taken.
        if (vp.patch_size != v->processor.patch_size || vp.merge_size != v->processor.merge_size ||
            vp.temporal_patch_size != v->processor.temporal_patch_size || vp.mean != v->processor.mean ||
            vp.std != v->processor.std || vp.rescale_factor != v->processor.rescale_factor)
          throw std::runtime_error("video_preprocessor_config.json: its patch, merge or temporal size, mean, std or "
                                   "rescale factor differ from preprocessor_config.json's (not supported)");
        v->video_token_id = cfg.vision->video_token_id;
        v->max_videos = o.mm_per_prompt.videos;
        v->video_decode.max_bytes = v->media.max_bytes;
        const int64_t patch_tokens =
            std::max(vp.max_pixels / vp.temporal_patch_size, vp.min_pixels) / (factor * factor) + 1;
        encoder_tokens = std::max(encoder_tokens, patch_tokens);
        lm.encoder->reserve(encoder_tokens * cfg.vision->merge_unit());
        v->max_patch_tokens = encoder_tokens;
      } catch (const std::exception& e) {
        v->video_token_id = -1;
        v->video_unusable = e.what();
      }
      lm.vision = std::move(v);
      const auto& vc = *cfg.vision;
      if (lm.vision->video_token_id >= 0)
        spdlog::info("video: up to {} per prompt, {} fps, {} .. {} frames, {} .. {} pixels over all frames; decoding "
                     "limits {} s, {} frames, {} pixels a frame",
                     lm.vision->max_videos, lm.vision->video.fps, lm.vision->video.min_frames,
                     lm.vision->video.max_frames, lm.vision->video.image.min_pixels, lm.vision->video.image.max_pixels,
                     lm.vision->video_decode.max_seconds, lm.vision->video_decode.max_frames,
                     lm.vision->video_decode.max_pixels);
      else
        spdlog::warn("video: not taken: {}", lm.vision->video_unusable);
      spdlog::info("vision tower: {} blocks, hidden {}, {} heads, patch {} (merge {}), {:.1f} MiB on {}, loaded in {:.2f} s; "
                   "images per prompt <= {}, {} .. {} pixels each, {} image tokens per step; image URLs: data:{}{}",
                   vc.depth, vc.hidden_size, vc.num_heads, vc.patch_size, vc.spatial_merge_size,
                   mib(lm.encoder->weights().bytes), lm.backend->name(),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t_vis).count(), lm.vision->max_images,
                   lm.vision->processor.min_pixels, lm.vision->processor.max_pixels, encoder_tokens,
                   o.allowed_media_domains.empty() ? "" : ", http(s) from " + std::to_string(o.allowed_media_domains.size()) + " hosts",
                   o.allowed_local_media_path.empty() ? "" : ", files under " + o.allowed_local_media_path);
    } catch (const std::exception& e) {
      lm.encoder.reset();
      lm.vision.reset();
      vision_unusable = std::string("its vision tower could not be loaded: ") + e.what();
      spdlog::warn("vision tower: not loaded, requests with images are refused: {}", e.what());
    }
  } else {
    spdlog::info("vision tower: none ({}); requests with images are refused", vision_unusable);
  }
  lm.served.vision = lm.vision.get();
  lm.served.vision_unusable = vision_unusable;
  return encoder_tokens;
}

// Bytes for the K/V blocks and state slots: --kv-cache-memory, or on a device backend what
// --gpu-memory-utilization leaves after the weights and activations.
int64_t cache_budget(const ServerOptions& o, LoadedModel& lm) {
  if (o.kv_cache_memory) return *o.kv_cache_memory;
  if (lm.backend->device_memory().total_bytes == 0) return kDefaultCpuCacheBytes;
  const auto d = qwen35::measure_device_budget(*lm.model, o.gpu_memory_utilization.value_or(0.9),
                                               o.max_num_batched_tokens, o.max_num_seqs, o.block_size);
  spdlog::info("{}", d.describe());
  return d.budget_bytes;
}

// The engine's configuration from the options; `positions` is the model's (0: unknown).
scheduler::EngineConfig engine_config(const ServerOptions& o, int64_t budget, int64_t positions, int64_t encoder_tokens,
                                      ServerMetrics* metrics) {
  scheduler::EngineConfig ec;
  ec.scheduler.max_num_seqs = o.max_num_seqs;
  ec.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  ec.scheduler.max_encoder_tokens = encoder_tokens;
  ec.max_queue = o.max_queue;
  ec.max_ctx = o.max_ctx > 0 ? o.max_ctx : (positions > 0 ? positions : 4096);  // the engine lowers it to the pool
  ec.block_size = o.block_size;
  ec.cache_bytes = budget;
  // Prefix-cache state snapshots come out of the same budget.
  ec.prefix_caching = o.prefix_caching;
  if (o.prefix_caching)
    ec.snapshot_bytes = o.prefix_cache_state_memory
                            ? *o.prefix_cache_state_memory
                            : static_cast<int64_t>(static_cast<double>(budget) * kDefaultSnapshotShare);
  if (o.prefix_caching) ec.host_cache_bytes = o.kv_offload_memory;
  if (o.prefix_caching) ec.host_disk_dir = o.kv_offload_dir;
  ec.speculative = o.speculative;
  if (o.enable_lora) {
    ec.scheduler.max_loras = o.max_loras;
    ec.max_lora_rank = o.max_lora_rank;
  }
  ec.step_graphs = !o.enforce_eager;
  if (metrics)
    ec.on_finish = [metrics](scheduler::RequestId, scheduler::FinishReason, const scheduler::RequestMetrics& m) {
      metrics->observe_request(m);
    };
  return ec;
}

// The start-up log of what the engine made: cache, slots, concurrency, graphs, prefix caching
// and speculative decoding.
void log_capacity(const ServerOptions& o, const LoadedModel& lm) {
  const scheduler::Engine& engine = *lm.engine;
  const scheduler::EngineConfig& ec = engine.config();
  const kvcache::PoolSizes& ps = engine.pool_sizes();
  const kvcache::CacheGeometry geo = lm.model->cache_geometry();
  const bool contiguous = ec.reserve_tokens > 0;
  const int64_t ctx = engine.max_ctx();
  spdlog::info("K/V cache: {} blocks x {} tokens = {} tokens, {:.1f} MiB ({}, {} layers x {} KV heads x {}), {}",
               ps.num_blocks, ps.block_size, ps.token_capacity(), mib(ps.kv_bytes), dtype_name(geo.k_dtype),
               geo.n_attention_layers, geo.n_kv_heads, geo.head_dim,
               contiguous ? "contiguous baseline: max-ctx reserved per sequence" : "paged");
  spdlog::info("DeltaNet state slots: {} ({:.1f} MiB, {:.2f} MiB per sequence; recurrent state {})", ps.num_slots,
               mib(ps.state_bytes), mib(geo.state_bytes_per_slot()), dtype_name(geo.state.recurrent_dtype));
  const double fit = static_cast<double>(ps.token_capacity()) / static_cast<double>(ctx);
  spdlog::info("max-ctx {} tokens; max concurrency at max-ctx: {} sequences ({:.2f}x max-ctx in K/V, {} state slots, "
               "--max-num-seqs {}); step budget {} tokens; queue {}",
               ctx, std::min<int64_t>(static_cast<int64_t>(fit), ps.num_slots), fit, ps.num_slots,
               ec.scheduler.max_num_seqs, ec.scheduler.max_num_batched_tokens, ec.max_queue);
  if (lm.backend->can_record_steps() && o.enforce_eager)
    spdlog::info("CUDA graphs: off (--enforce-eager)");
  else if (lm.backend->can_record_steps())
    spdlog::info("CUDA graphs: decode and verify steps of up to {} sequences are recorded and replayed",
                 ec.scheduler.max_num_seqs);
  if (!o.prefix_caching)
    spdlog::info("prefix caching: off (--no-enable-prefix-caching)");
  else if (!ec.prefix_caching)
    spdlog::info("prefix caching: off (the contiguous baseline keeps no blocks)");
  else if (ps.num_snapshots == 0)
    spdlog::warn("prefix caching: no DeltaNet state snapshot fits {} bytes (one is {:.1f} MiB): nothing will hit",
                 ec.snapshot_bytes, mib(geo.state_bytes_per_slot()));
  else
    spdlog::info("prefix caching: on; {} state snapshots ({:.1f} MiB, {:.2f} MiB each), finished requests' blocks "
                 "stay cached until their space is needed",
                 ps.num_snapshots, mib(ps.snapshot_bytes), mib(geo.state_bytes_per_slot()));
  if (o.kv_offload_memory > 0 && ec.prefix_caching) {
    const auto& h = engine.host_tier();
    if (h.sizes.blocks == 0)
      spdlog::warn("host tier: --kv-offload-memory {} bytes holds not one block ({:.2f} MiB) and one snapshot "
                   "({:.1f} MiB): off",
                   o.kv_offload_memory, mib(h.block_bytes), mib(h.state_bytes));
    else
      spdlog::info("host tier: {} blocks = {} tokens ({:.1f} MiB) and {} state snapshots ({:.1f} MiB) in {} host "
                   "memory; evicted prefixes load back from it",
                   h.sizes.blocks, int64_t{h.sizes.blocks} * ps.block_size,
                   mib(int64_t{h.sizes.blocks} * h.block_bytes), h.sizes.snapshots,
                   mib(int64_t{h.sizes.snapshots} * h.state_bytes),
                   lm.backend->name() == "cpu" ? "ordinary" : "pinned");
  }
  if (ps.num_slots < o.max_num_seqs && !contiguous)
    spdlog::warn("only {} state slots fit in half the cache budget: at most {} sequences run at once", ps.num_slots,
                 ps.num_slots);
  const int32_t states_per_seq = 1 + (ec.speculative.enabled() ? ec.speculative.num_speculative_tokens : 0);
  if (ec.speculative.enabled())
    spdlog::info("speculative decoding: {}, {} drafted tokens per step (a speculating sequence holds up to {} state "
                 "slots)",
                 ec.speculative.method, ec.speculative.num_speculative_tokens, states_per_seq);
}

// --enable-lora: the adapter slots in the model's memory (before the cache budget is measured,
// so the cache leaves them room; the engine makes them again, the same size) and the
// --lora-modules, each read and checked now.
void load_loras(const ServerOptions& o, const std::string& base_name, LoadedModel& lm) {
  if (!o.enable_lora) return;
  lm.model->enable_lora(o.max_loras, o.max_lora_rank);
  spdlog::info("LoRA: {} slots of rank <= {} ({:.1f} MiB), host copies of {} adapters", o.max_loras, o.max_lora_rank,
               static_cast<double>(lm.model->lora_slots()->bytes()) / (1 << 20), o.max_cpu_loras.value_or(o.max_loras));
  lm.loras = std::make_unique<LoraRegistry>(lm.model->config(), qwen35::LoraLimits{.max_rank = o.max_lora_rank},
                                            o.max_cpu_loras.value_or(o.max_loras), base_name);
  for (const auto& [name, path] : o.lora_modules) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      lm.loras->add(name, path);
    } catch (const std::exception& e) {
      throw std::runtime_error("--lora-modules " + name + "=" + path + ": " + e.what());
    }
    spdlog::info("LoRA adapter '{}' from {}: read and checked in {:.0f} ms", name, path,
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
}

// The engine over the loaded model: its budget and configuration, the sampler for where the
// backend leaves the logits, what a composer changes, and the checks of the pools it sized.
void start_engine(const ServerOptions& o, ServerMetrics* metrics, const EngineComposer& compose, int64_t encoder_tokens,
                  LoadedModel& lm) {
  const int64_t positions = lm.model->config().max_positions();
  if (positions > 0 && o.max_ctx > positions)
    throw std::runtime_error("--max-ctx " + std::to_string(o.max_ctx) + " exceeds the model's " +
                             std::to_string(positions) +
                             " positions (max_position_embeddings, or YaRN's factor x original_max_position_embeddings; "
                             "--hf-overrides can set rope_parameters)");
  EngineParts parts;
  parts.config = engine_config(o, cache_budget(o, lm), positions, encoder_tokens, metrics);
  parts.config.host_disk_fingerprint = lm.fingerprint;
  BackendSampler bs = make_sampler(*lm.backend);
  parts.model = std::make_unique<scheduler::Qwen35ForwardModel>(*lm.model, bs.device_logits, lm.encoder.get());
  parts.sampler = std::move(bs.sampler);
  if (compose) compose(parts);
  lm.forward = std::move(parts.model);
  try {
    lm.engine = std::make_unique<scheduler::Engine>(*lm.forward, std::move(parts.config), std::move(parts.sampler),
                                                    std::move(parts.drafter));
  } catch (const std::invalid_argument& e) {
    // The pool sizing names itself; the user needs the flag that set the budget.
    std::string why = e.what();
    if (why.rfind("size_pools: ", 0) != 0) throw;
    why.erase(0, 12);
    if (o.prefix_cache_state_memory && why.find("snapshot") != std::string::npos)
      throw std::runtime_error("--prefix-cache-state-memory: " + why);
    const std::string budget_flag =
        !o.kv_cache_memory && lm.backend->device_memory().total_bytes > 0 ? "--gpu-memory-utilization" : "--kv-cache-memory";
    throw std::runtime_error(budget_flag + ": " + why + "; raise " + budget_flag);
  }
  const int64_t capacity = lm.engine->pool_sizes().token_capacity();
  if (o.max_ctx > 0 && o.max_ctx > capacity)
    throw std::runtime_error("--max-ctx " + std::to_string(o.max_ctx) + " is more than the K/V cache holds (" +
                             std::to_string(capacity) + " tokens); raise --kv-cache-memory or lower --max-ctx");
  log_capacity(o, lm);
}

}  // namespace

std::unique_ptr<LoadedModel> load_model(const ServerOptions& o, const std::string& model_dir, bool progress_bar,
                                        ServerMetrics* metrics, const EngineComposer& compose) {
  const fs::path dir(model_dir);
  if (!fs::is_regular_file(dir / "config.json"))
    throw std::runtime_error("--model " + model_dir + ": no config.json (expected a Hugging Face checkpoint directory)");
  auto lm = std::make_unique<LoadedModel>();
  lm->backend = make_backend(o);
  load_text_assets(o, dir, *lm);
  // generation_config.json's defaults are checked now, not at the first request that omits one.
  const GenerationDefaults defaults = GenerationDefaults::load(dir);
  load_weights(o, dir, progress_bar, *lm);
  const int64_t encoder_tokens = load_vision(o, dir, *lm);
  load_loras(o, served_name(o, model_dir), *lm);
  if (!o.kv_offload_dir.empty()) {
    const kernels::Backend& be = *lm->backend;
    lm->fingerprint = model_fingerprint(
        dir, std::string(be.name()) + " kv " + std::string(dtype_name(be.kv_cache_dtype())) + " state " +
                 std::string(dtype_name(be.recurrent_state_dtype())) + " fp8 " + (be.fp8_weights() ? "kept" : "no") + " int4 " +
                 (be.int4_weights() ? "kept" : "no") + " overrides " + o.hf_overrides);
  }
  start_engine(o, metrics, compose, encoder_tokens, *lm);

  // Structured outputs compile against the model's vocabulary (the logits' width).
  const auto t_vocab = std::chrono::steady_clock::now();
  lm->grammars = std::make_unique<GrammarCache>(
      grammar::TokenVocabulary::from_tokenizer(*lm->tokenizer, static_cast<int32_t>(lm->engine->vocab_size())));
  spdlog::info("structured outputs: vocabulary of {} tokens ({} text) indexed in {:.0f} ms",
               lm->grammars->vocabulary().size(), lm->grammars->vocabulary().num_text_tokens(),
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_vocab).count());

  auto& s = lm->served;
  s.name = served_name(o, model_dir);
  s.dir = fs::absolute(dir);
  s.tokenizer = lm->tokenizer.get();
  s.chat_template = lm->chat_template.get();
  s.engine = lm->engine.get();
  s.eos_ids = lm->model->config().eos_token_ids;
  s.defaults = defaults;
  s.created = static_cast<int64_t>(std::time(nullptr));
  s.grammars = lm->grammars.get();
  s.loras = lm->loras.get();
  s.runtime_lora = o.allow_runtime_lora;
  spdlog::info("sampling defaults from generation_config.json: {}", s.defaults.describe());
  return lm;
}

}  // namespace ds::server
