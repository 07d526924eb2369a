// ServerOptions: serve's command line, parsed once to typed values.
//
// add_server_options binds every flag to a ServerOptions field with its parser: sizes to
// bytes, element types to DType, the speculative config to scheduler::SpeculativeConfig, the
// backend, quantisation and FP8 storage to enums. A value that does not parse is refused by
// CLI11 as it reads the command line, naming the flag (CLI::ValidationError); the parsers are
// public for programs that take the same values. validate_options then checks the
// combinations that cannot work before anything is loaded; checks that need the model
// (max-ctx against its positions and the cache) happen in the loader (model_loader.h).
//
// The flags are the ones users know from vLLM and llama-server (serving-notes.md §6): the
// model directory (positional, as `vllm serve MODEL`, or -m / --model), --host, --port,
// --served-model-name, --instance-id, --api-key (or DELTASERVE_API_KEY), --max-ctx,
// --kv-cache-dtype, --mamba-ssm-cache-dtype, --block-size, --gpu-memory-utilization /
// --kv-cache-memory, --max-num-seqs, --max-num-batched-tokens, --max-queue,
// --enable-prefix-caching / --no-enable-prefix-caching, --prefix-cache-state-memory,
// --speculative-config, --enforce-eager, --quantization, --fp8-weights, --backend,
// --chat-template, --limit-mm-per-prompt, --allowed-media-domains, --allowed-local-media-path,
// --language-model-only, --enable-lora, --lora-modules, --max-loras, --max-lora-rank,
// --max-cpu-loras, --allow-runtime-lora, --default-thinking-budget, --reasoning-effort-budgets, --hf-overrides,
// --log-level, --log-format, and the limits of limit_options.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "model/qwen35/weights.h"
#include "scheduler/speculative_config.h"
#include "server/limit_options.h"

namespace CLI {
class App;
}

namespace ds::server {

inline constexpr int64_t kDefaultCpuCacheBytes = int64_t{1} << 30;  // 1 GiB
// The part of the cache budget that holds prefix-cache state snapshots by default.
inline constexpr double kDefaultSnapshotShare = 0.1;

// --backend: auto picks cuda when the build has it and a device is present, else cpu.
enum class BackendChoice : uint8_t { automatic, cpu, cuda, hip };

// Media items per prompt (--limit-mm-per-prompt).
struct MmLimits {
  int64_t images = 8;
  int64_t videos = 1;
};

struct ServerOptions {
  std::string model;  // empty: the bundled tiny model (default_model_dir)
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string served_model_name;  // empty: the model directory's name
  std::string instance_id;        // empty: host:port (as bound)
  std::string api_key;
  int64_t max_ctx = 0;  // 0: min(model positions, what the cache holds)
  std::optional<DType> kv_cache_dtype;       // the K/V element type; none: the backend's (auto)
  DType recurrent_state_dtype = DType::f32;  // --mamba-ssm-cache-dtype (auto: f32, as the model's config asks)
  int block_size = 16;
  std::optional<double> gpu_memory_utilization;
  std::optional<int64_t> kv_cache_memory;  // bytes
  int max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  int max_queue = 1024;
  bool prefix_caching = true;
  std::optional<int64_t> prefix_cache_state_memory;  // bytes; none: kDefaultSnapshotShare of the budget
  int64_t kv_offload_memory = 0;  // bytes of host memory for the prefix cache's host tier; 0 = none
  std::string kv_offload_dir;     // the disk tier under it; empty = none
  scheduler::SpeculativeConfig speculative;           // --speculative-config (speculative_option.h); off by default
  bool enforce_eager = false;                         // no recorded steps (EngineConfig::step_graphs)
  qwen35::Quantization quantization = qwen35::Quantization::none;  // qwen35::parse_quantization
  bool fp8_weights_resident = true;  // --fp8-weights resident (CudaBackendOptions::fp8_weights) or bf16
  BackendChoice backend = BackendChoice::automatic;
  std::string chat_template;
  // Images (vLLM's flags; server/image_inputs.h, server/media_fetch.h).
  MmLimits mm_per_prompt;                          // --limit-mm-per-prompt {"image": N, "video": M}
  std::vector<std::string> allowed_media_domains;  // hosts whose http(s) image URLs are fetched
  std::string allowed_local_media_path;            // file:// image URLs under this directory
  bool language_model_only = false;                // skip the vision tower: no images, its memory freed
  // LoRA adapters (vLLM's flags; server/lora_registry.h, scheduler.h "LoRA adapters"):
  // --lora-modules name=DIR ..., slots in the model (--max-loras) of up to --max-lora-rank,
  // host copies kept (--max-cpu-loras, default max_loras), and the load/unload endpoints
  // (--allow-runtime-lora, which needs --api-key).
  bool enable_lora = false;
  std::vector<std::pair<std::string, std::string>> lora_modules;
  int max_loras = 1;
  int64_t max_lora_rank = 16;
  std::optional<int> max_cpu_loras;
  bool allow_runtime_lora = false;
  // Thinking budgets (thinking_setup.h): the budget of requests that name none, and the budgets
  // of reasoning efforts (--reasoning-effort-budgets low=1024,medium=4096,high=16384).
  std::optional<int64_t> default_thinking_budget;
  std::map<std::string, int64_t> reasoning_effort_budgets;
  // --hf-overrides: a JSON object deep-merged into config.json at load (vLLM's; config.h), as
  // checked and written back compactly; empty: none.
  std::string hf_overrides;
  std::string log_level = "info";
  std::string log_format = "text";
  LimitOptions limits;  // connections, bodies, timeouts, grammar compiles (limit_options.h)
};

void add_server_options(CLI::App& app, ServerOptions& o);

// An empty string when the options can work together, else what is wrong (one line).
std::string validate_options(const ServerOptions& o);

// The flags' parsers; each throws std::invalid_argument with a message naming the flag.
// "1073741824", "1GiB", "512M", "1.5G" -> bytes (K/M/G are 1000-based, Ki/Mi/Gi 1024-based; a
// trailing B is optional).
int64_t parse_bytes(const std::string& text);
BackendChoice parse_backend(const std::string& text);
std::string_view backend_name(BackendChoice b);
std::optional<DType> parse_kv_cache_dtype(const std::string& text);  // "auto": none
DType parse_recurrent_state_dtype(const std::string& text);         // auto, float32, bfloat16
bool parse_fp8_weights_resident(const std::string& text);           // resident, bf16
int64_t parse_thinking_budget(const std::string& text);             // a token count >= 0
std::string parse_hf_overrides(const std::string& text);            // a JSON object
// --limit-mm-per-prompt: {"image": N, "video": M} (each 0 to 1,024; a key left out keeps its
// default; audio, which is not supported, only as 0).
MmLimits parse_limit_mm_per_prompt(const std::string& text);
// --lora-modules: "name=DIR" or vLLM's JSON '{"name": ..., "path": ...}' -> (name, DIR).
std::pair<std::string, std::string> parse_lora_module(const std::string& text);

// Where the bundled model lives: next to the executable's source tree (build/serve ->
// ../tests/data/tiny-qwen35), in the source tree it was built from, or under the current
// directory. Empty when none exists.
std::filesystem::path default_model_dir(const char* argv0);

}  // namespace ds::server
