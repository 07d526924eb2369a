#include "server/server_options.h"

#include <unistd.h>

#include <cctype>
#include <cmath>
#include <stdexcept>
#include <string_view>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "server/speculative_option.h"
#include "server/thinking_setup.h"

#ifndef DELTASERVE_SOURCE_DIR
#define DELTASERVE_SOURCE_DIR ""
#endif

namespace ds::server {
namespace {

// A flag whose value `parse` turns into `to`, refused by CLI11 (naming the flag) when it does not parse.
template <class T, class Parse>
CLI::Option* add_parsed(CLI::App& app, const std::string& name, T& to, Parse parse, const std::string& help,
                        const std::string& default_text = {}) {
  CLI::Option* opt = app.add_option_function<std::string>(
      name,
      [&to, parse, flag = name.substr(0, name.find(','))](const std::string& text) {
        try {
          to = parse(text);
        } catch (const std::invalid_argument& e) {
          const std::string what = e.what();
          throw CLI::ValidationError(what.rfind(flag, 0) == 0 ? what : flag + ": " + what);
        }
      },
      help);
  if (!default_text.empty()) opt->default_str(default_text);
  return opt;
}

}  // namespace

void add_server_options(CLI::App& app, ServerOptions& o) {
  // `serve DIR` as `vllm serve MODEL`, `-m DIR` as llama-server; giving it twice is an error.
  app.add_option("model,-m,--model", o.model,
                 "Hugging Face checkpoint directory of a Qwen3.5/3.6 dense model (config.json, "
                 "*.safetensors, tokenizer.json), as `serve DIR`, `-m DIR` or `--model DIR`; default: the "
                 "bundled tests/data/tiny-qwen35 (random weights)");
  app.add_option("--host", o.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "Port to listen on (0 = any free port, printed at start-up)")
      ->capture_default_str();
  app.add_option("--served-model-name", o.served_model_name,
                 "Model name clients send as \"model\" (default: the model directory's name)");
  app.add_option("--instance-id", o.instance_id,
                 "This replica's name in logs, in /metrics (deltaserve:instance_info) and in the "
                 "x-deltaserve-instance header of every reply (default: host:port)");
  app.add_option("--api-key", o.api_key,
                 "Require 'Authorization: Bearer KEY' on every route except /health and /metrics")
      ->envname("DELTASERVE_API_KEY");
  app.add_option("--max-ctx", o.max_ctx,
                 "Tokens per request, prompt + reply (default: min(the model's max positions, "
                 "what the K/V cache holds))");
  add_parsed(app, "--kv-cache-dtype", o.kv_cache_dtype, parse_kv_cache_dtype,
             "K/V element type: auto (the backend's: cpu f32, cuda bf16); cuda also f16, q8_0, q4_0 "
             "(ggml blocks of 32: about 1.9x / 3.6x the tokens of bf16 in the same memory)",
             "auto");
  add_parsed(app, "--mamba-ssm-cache-dtype,--mamba-ssm-dtype", o.recurrent_state_dtype, parse_recurrent_state_dtype,
             "DeltaNet recurrent state element type: auto (float32, as the model's config asks), float32 or "
             "bfloat16 (half the state's memory and of the bytes that dominate decode steps at high "
             "concurrency; the state is rounded to bf16 once per step)",
             "auto");
  app.add_option("--block-size", o.block_size, "Tokens per K/V cache block")->capture_default_str();
  app.add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                 "Fraction of device memory for weights + caches (GPU backends; default 0.9)");
  add_parsed(app, "--kv-cache-memory", o.kv_cache_memory, parse_bytes,
             "Bytes for the K/V blocks and DeltaNet state slots together, e.g. 1GiB, 512MiB "
             "(default on cpu: 1GiB)");
  app.add_option("--max-num-seqs", o.max_num_seqs, "Sequences running at once (each holds a state slot)")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", o.max_num_batched_tokens,
                 "Tokens per engine step (decodes plus prefill chunks)")
      ->capture_default_str();
  app.add_option("--max-queue", o.max_queue,
                 "Requests waiting to start; beyond it requests get 429 with Retry-After")
      ->capture_default_str();
  app.add_flag_callback(
      "--enable-prefix-caching", [&o] { o.prefix_caching = true; },
      "Keep finished requests' K/V blocks and DeltaNet state snapshots for requests that share their "
      "prefix (the default)");
  app.add_flag_callback(
      "--no-enable-prefix-caching", [&o] { o.prefix_caching = false; }, "Recompute every prompt from scratch");
  add_parsed(app, "--prefix-cache-state-memory", o.prefix_cache_state_memory, parse_bytes,
             "Bytes of the cache budget for DeltaNet state snapshots of cached prefixes, e.g. 4GiB "
             "(default: a tenth of the budget)");
  add_parsed(app, "--kv-offload-memory", o.kv_offload_memory, parse_bytes,
             "Host memory (pinned on a GPU) for the prefix cache's host tier: K/V blocks and DeltaNet state "
             "snapshots the device cache evicts go there and load back on a hit, e.g. 64GiB (default: none)");
  app.add_option("--kv-offload-dir", o.kv_offload_dir,
                 "Directory for the host tier's disk tier: its entries are also written there and read back "
                 "at start-up, so a restarted server keeps its cached prefixes (needs --kv-offload-memory)");
  // The K/V cache is always the paged block pool; the flag stays so that the command line users
  // know (`serve --model DIR --paged-attention --max-ctx N`) keeps working.
  app.add_flag_callback(
      "--paged-attention", [] {}, "K/V in the paged block pool (always so; accepted for familiar command lines)");
  app.add_flag("--enforce-eager", o.enforce_eager,
               "Run every step eagerly: no CUDA graphs for decode and verify steps (they are on by default with "
               "the cuda backend)");
  add_parsed(app, "--speculative-config", o.speculative, parse_speculative_config,
             "Speculative decoding as JSON: '{\"method\": \"ngram\", \"num_speculative_tokens\": 3}' "
             "(methods: ngram = prompt lookup, with prompt_lookup_min/max; mtp = the checkpoint's MTP module; "
             "disable_by_batch_size: no drafts while more sequences run; draft_vocab_size: mtp drafts only "
             "among the first N token ids, its lm_head reading N rows, e.g. 65536 for English and code; "
             "draft_token_map: mtp drafts only among the ids a JSON file lists, e.g. from "
             "bench/tools/make_draft_token_map.py)");
  add_parsed(app, "--quantization", o.quantization, qwen35::parse_quantization,
             "Weight quantisation: none; fp8 (block-wise e4m3 of the linear weights at load, as Qwen's "
             "-FP8 releases; a no-op on an FP8 checkpoint, which loads as stored); gptq or awq (4-bit "
             "checkpoints, detected from config.json without the flag: it only checks the checkpoint is one)",
             "none");
  add_parsed(app, "--fp8-weights", o.fp8_weights_resident, parse_fp8_weights_resident,
             "How the CUDA backend stores FP8 weights: resident (kept e4m3: ~40% less weight memory, "
             "faster decode and prefill than bf16; prefill and steps of more than 8 sequences quantise "
             "the activations to e4m3 per 128 columns) or bf16 (dequantised at load: bf16's memory, "
             "speed and activations; docs/bench-log)",
             "resident");
  add_parsed(app, "--backend", o.backend, parse_backend, "Compute backend: cpu, cuda, hip or auto", "auto");
  app.add_option("--chat-template", o.chat_template,
                 "Jinja chat template file (default: the model's chat_template.jinja or "
                 "tokenizer_config.json)");
  add_parsed(app, "--limit-mm-per-prompt", o.mm_per_prompt, parse_limit_mm_per_prompt,
             "Images and videos per prompt at most, as JSON: '{\"image\": 4, \"video\": 2}' (default 8 images, "
             "1 video)");
  app.add_option("--allowed-media-domains", o.allowed_media_domains,
                 "Hosts whose http(s) image URLs the server fetches (default: none; data: URLs are always taken)")
      ->delimiter(',');
  app.add_option("--allowed-local-media-path", o.allowed_local_media_path,
                 "Directory whose files file:// image URLs may name (default: none)");
  app.add_flag("--language-model-only", o.language_model_only,
               "Do not load the vision tower: requests with images are refused, its memory stays free");
  app.add_flag("--enable-lora", o.enable_lora, "Serve LoRA adapters on the base model (--lora-modules)");
  app.add_option_function<std::vector<std::string>>(
         "--lora-modules",
         [&o](const std::vector<std::string>& v) {
           for (const std::string& m : v) o.lora_modules.push_back(parse_lora_module(m));
         },
         "LoRA adapters as name=DIR (PEFT's adapter_config.json and adapter_model.safetensors); requests "
         "select one with \"model\": name");
  app.add_option("--max-loras", o.max_loras, "LoRA adapters in the model's memory at once (slots)")
      ->capture_default_str();
  app.add_option("--max-lora-rank", o.max_lora_rank, "The largest LoRA rank served (sizes the slots)")
      ->capture_default_str();
  app.add_option_function<int>(
      "--max-cpu-loras", [&o](int n) { o.max_cpu_loras = n; },
      "LoRA adapters whose host copies are kept (default --max-loras; others are read again when asked for)");
  app.add_flag("--allow-runtime-lora", o.allow_runtime_lora,
               "Enable POST /v1/load_lora_adapter and /v1/unload_lora_adapter (local paths only; needs --api-key)");
  add_parsed(app, "--default-thinking-budget", o.default_thinking_budget, parse_thinking_budget,
             "Reasoning tokens a chat reply may think before it is made to close its <think> block, for "
             "requests that set no thinking_token_budget, thinking_budget or mapped reasoning_effort "
             "(default: no limit)");
  add_parsed(app, "--reasoning-effort-budgets", o.reasoning_effort_budgets, parse_effort_budgets,
             "Thinking budgets of reasoning efforts (reasoning_effort, Responses' reasoning.effort), e.g. "
             "low=1024,medium=4096,high=16384 (efforts low, medium, high, xhigh; default: none)");
  add_parsed(app, "--hf-overrides", o.hf_overrides, parse_hf_overrides,
             "JSON object deep-merged into the checkpoint's config.json at load, e.g. YaRN for long context: "
             "'{\"text_config\": {\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
             "\"original_max_position_embeddings\": 262144, ...}}}' (logged at start-up)");
  app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str();
  app.add_option("--log-format", o.log_format, "text or json (one JSON object per line)")
      ->capture_default_str();
  add_limit_options(app, o.limits);
}

int64_t parse_thinking_budget(const std::string& text) {
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used != text.size() || text.empty() || v < 0 || v > kMaxThinkingBudget)
    throw std::invalid_argument("--default-thinking-budget must be a token count >= 0, got '" + text + "'");
  return v;
}

std::string parse_hf_overrides(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw std::invalid_argument("--hf-overrides must be a JSON object");
  return j.dump();
}

BackendChoice parse_backend(const std::string& text) {
  if (text == "auto") return BackendChoice::automatic;
  if (text == "cpu") return BackendChoice::cpu;
  if (text == "cuda") return BackendChoice::cuda;
  if (text == "hip") return BackendChoice::hip;
  throw std::invalid_argument("--backend must be cpu, cuda, hip or auto (got '" + text + "')");
}

std::string_view backend_name(BackendChoice b) {
  switch (b) {
    case BackendChoice::automatic: return "auto";
    case BackendChoice::cpu: return "cpu";
    case BackendChoice::cuda: return "cuda";
    case BackendChoice::hip: return "hip";
  }
  return "?";
}

std::optional<DType> parse_kv_cache_dtype(const std::string& text) {
  if (text == "auto") return std::nullopt;
  try {
    return ds::parse_dtype(text);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("--kv-cache-dtype: ") + e.what());
  }
}

DType parse_recurrent_state_dtype(const std::string& s) {
  if (s == "auto" || s == "float32" || s == "f32") return DType::f32;
  if (s == "bfloat16" || s == "bf16") return DType::bf16;
  throw std::invalid_argument("--mamba-ssm-cache-dtype must be auto, float32 or bfloat16, got '" + s + "'");
}

bool parse_fp8_weights_resident(const std::string& text) {
  if (text == "resident") return true;
  if (text == "bf16") return false;
  throw std::invalid_argument("--fp8-weights must be bf16 or resident, got '" + text + "'");
}

int64_t parse_bytes(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    throw std::invalid_argument("'" + text + "' is not a size in bytes (e.g. 1073741824, 1GiB, 512MiB)");
  }
  std::string unit = text.substr(used);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit.back() == 'b') unit.pop_back();
  double mult = 1;
  if (unit.empty()) mult = 1;
  else if (unit == "k") mult = 1e3;
  else if (unit == "m") mult = 1e6;
  else if (unit == "g") mult = 1e9;
  else if (unit == "t") mult = 1e12;
  else if (unit == "ki") mult = 1024.0;
  else if (unit == "mi") mult = 1024.0 * 1024;
  else if (unit == "gi") mult = 1024.0 * 1024 * 1024;
  else if (unit == "ti") mult = 1024.0 * 1024 * 1024 * 1024;
  else throw std::invalid_argument("'" + text + "': unknown unit (use K, M, G, Ki, Mi, Gi)");
  const double bytes = v * mult;
  if (!std::isfinite(bytes) || bytes <= 0 || bytes > 9.0e18)
    throw std::invalid_argument("'" + text + "' is not a positive size");
  return static_cast<int64_t>(bytes);
}

std::string validate_options(const ServerOptions& o) {
  if (o.port < 0 || o.port > 65535) return "--port must be in 0..65535";
  if (o.host.empty()) return "--host must not be empty";
  if (o.log_format != "text" && o.log_format != "json") return "--log-format must be text or json";
  if (o.block_size < 1 || o.block_size > 1024) return "--block-size must be in 1..1024";
  if (o.max_num_seqs < 1) return "--max-num-seqs must be at least 1";
  if (o.max_num_batched_tokens < 1) return "--max-num-batched-tokens must be at least 1";
  if (o.max_queue < 0) return "--max-queue must be >= 0";
  if (o.max_ctx < 0) return "--max-ctx must be positive";
  if (o.gpu_memory_utilization && o.kv_cache_memory) return "give --gpu-memory-utilization or --kv-cache-memory, not both";
  if (o.gpu_memory_utilization && !(*o.gpu_memory_utilization > 0 && *o.gpu_memory_utilization <= 1))
    return "--gpu-memory-utilization must be in (0, 1]";
  // With --backend auto the loader decides (cuda when a device is there); it refuses the flag
  // if it ends up on the cpu.
  if (o.backend == BackendChoice::cpu && o.gpu_memory_utilization)
    return "--gpu-memory-utilization sizes device memory; the cpu backend takes --kv-cache-memory BYTES "
           "(default 1GiB)";
  if (o.prefix_cache_state_memory && !o.prefix_caching)
    return "--prefix-cache-state-memory needs prefix caching (drop --no-enable-prefix-caching)";
  if (o.kv_offload_memory > 0 && !o.prefix_caching)
    return "--kv-offload-memory needs prefix caching (drop --no-enable-prefix-caching)";
  if (!o.kv_offload_dir.empty() && o.kv_offload_memory <= 0)
    return "--kv-offload-dir needs --kv-offload-memory (the disk tier keeps the host tier's entries)";
  if (!o.allowed_local_media_path.empty() && !std::filesystem::is_directory(o.allowed_local_media_path))
    return "--allowed-local-media-path: no such directory: " + o.allowed_local_media_path;
  if (!o.chat_template.empty() && !std::filesystem::is_regular_file(o.chat_template))
    return "--chat-template: no such file: " + o.chat_template;
  if (!o.model.empty() && !std::filesystem::is_directory(o.model))
    return "--model: no such directory: " + o.model;
  if (!o.enable_lora && (!o.lora_modules.empty() || o.allow_runtime_lora))
    return "--lora-modules and --allow-runtime-lora need --enable-lora";
  if (o.enable_lora) {
    if (o.max_loras < 1 || o.max_loras > 1024) return "--max-loras must be in 1..1024";
    if (o.max_lora_rank < 1 || o.max_lora_rank > 1024) return "--max-lora-rank must be in 1..1024";
    if (o.max_cpu_loras && *o.max_cpu_loras < o.max_loras) return "--max-cpu-loras must be at least --max-loras";
    if (o.allow_runtime_lora && o.api_key.empty())
      return "--allow-runtime-lora needs --api-key: the load/unload endpoints change what the server serves and "
             "read the server's files";
  }
  return validate_limit_options(o.limits);
}

MmLimits parse_limit_mm_per_prompt(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw std::invalid_argument("must be a JSON object such as {\"image\": 4, \"video\": 1}");
  MmLimits out;
  for (const auto& [k, v] : j.items()) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1024)
      throw std::invalid_argument("\"" + k + "\" must be an integer from 0 to 1024");
    if (k == "image")
      out.images = v.get<int64_t>();
    else if (k == "video")
      out.videos = v.get<int64_t>();
    else if (k == "audio" && v.get<int64_t>() == 0)
      continue;
    else
      throw std::invalid_argument("\"" + k + "\" inputs are not supported (only \"image\" and \"video\")");
  }
  return out;
}

std::pair<std::string, std::string> parse_lora_module(const std::string& text) {
  std::string name, path;
  if (!text.empty() && text.front() == '{') {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string() || !j.contains("path") ||
        !j["path"].is_string())
      throw std::invalid_argument("--lora-modules: '" + text + "' must be name=DIR or {\"name\": ..., \"path\": ...}");
    name = j["name"].get<std::string>();
    path = j["path"].get<std::string>();
  } else {
    const size_t eq = text.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("--lora-modules: '" + text + "' must be name=DIR");
    name = text.substr(0, eq);
    path = text.substr(eq + 1);
  }
  if (name.empty() || path.empty()) throw std::invalid_argument("--lora-modules: '" + text + "' needs a name and a DIR");
  return {name, path};
}

std::filesystem::path default_model_dir(const char* argv0) {
  namespace fs = std::filesystem;
  const fs::path rel = fs::path("tests") / "data" / "tiny-qwen35";
  std::vector<fs::path> candidates;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec && argv0) exe = fs::absolute(argv0, ec);
  if (!exe.empty()) {
    candidates.push_back(exe.parent_path().parent_path() / rel);  // build/serve
    candidates.push_back(exe.parent_path() / rel);
  }
  if (std::string(DELTASERVE_SOURCE_DIR).size()) candidates.push_back(fs::path(DELTASERVE_SOURCE_DIR) / rel);
  candidates.push_back(fs::current_path(ec) / rel);
  for (const auto& c : candidates)
    if (fs::is_regular_file(c / "config.json", ec)) return fs::weakly_canonical(c, ec);
  return {};
}

}  // namespace ds::server
