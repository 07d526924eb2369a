// Fuzz target: a LoRA adapter as a client of POST /v1/load_lora_adapter (or an operator's
// --lora-modules) hands it over: adapter_config.json's text, a NUL byte, then the bytes of
// adapter_model.safetensors. Both go through what load_lora_adapter runs on them: the config
// parser and its bounds (lora_config.h), the safetensors header checks (safetensors_file.h),
// and the key, shape, rank and dtype checks against a small model config (lora_adapter.h).
// Invariant: bad input is a std::runtime_error naming what is wrong, or nothing; any other
// exception escapes and is reported as a crash, as are sanitizer findings.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "model/qwen35/config.h"
#include "model/qwen35/lora_adapter.h"
#include "model/qwen35/safetensors_file.h"

namespace {

// A two-layer text model (one DeltaNet, one full-attention layer) small enough for the fuzzer to
// write valid tensors for.
const ds::qwen35::ModelConfig& model_config() {
  static const ds::qwen35::ModelConfig c = ds::qwen35::ModelConfig::parse(
      R"({"model_type": "qwen3_5_text", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2,
          "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "linear_key_head_dim": 4,
          "linear_value_head_dim": 4, "linear_num_key_heads": 1, "linear_num_value_heads": 2,
          "linear_conv_kernel_dim": 4, "layer_types": ["linear_attention", "full_attention"], "vocab_size": 16,
          "rms_norm_eps": 1e-6, "rope_theta": 10000, "partial_rotary_factor": 0.5})",
      "{}", "fuzz config.json");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t config_len = nul ? static_cast<size_t>(nul - data) : size;
  const std::string_view config(reinterpret_cast<const char*>(data), config_len);
  try {
    ds::qwen35::LoraConfig::parse(config);
  } catch (const std::runtime_error&) {
  }
  if (!nul) return 0;
  std::vector<uint8_t> st(nul + 1, data + size);
  try {
    const auto file = ds::qwen35::SafetensorsFile::from_bytes(std::move(st), "adapter_model.safetensors");
    const auto adapter = ds::qwen35::read_lora_adapter(config, *file, model_config(), {.max_rank = 4}, "fuzz");
    if (adapter.modules.empty() || adapter.host_bytes() <= 0) throw std::logic_error("an adapter without weights");
  } catch (const std::runtime_error&) {
  }
  return 0;
}
