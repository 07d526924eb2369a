// ModelConfig: the shape of a Qwen3.5 / Qwen3.6 dense text decoder, read from a checkpoint's
// config.json (and its stop ids from generation_config.json).
//
// Two layouts exist: the multimodal one of the released repos (model_type "qwen3_5", text
// settings under "text_config", weights under model.language_model.*) and the text-only one
// (model_type "qwen3_5_text" at the top level, weights under model.*). Every size comes from
// the file; the layer schedule from "layer_types" or, failing that, "full_attention_interval"
// (layer i is full attention iff (i + 1) % interval == 0). Anything the forward pass cannot
// honour (another activation, attention bias, a RoPE scaling other than YaRN, GQA ratios that
// do not divide) is refused with a message naming the key.
//
// RoPE: "rope_parameters" (transformers 5), or the older "rope_scaling" with top-level
// rope_theta / partial_rotary_factor (which wins when both are there, as in HF). rope_type
// "yarn" reads factor, original_max_position_embeddings (the text config's top-level key
// first, then the rope dict's, then max_position_embeddings, as HF's standardize_rope_params),
// beta_fast / beta_slow (32 / 1 when absent or 0), attention_factor (else from mscale and
// mscale_all_dim, else 0.1 ln(factor) + 1) and truncate (the top rope dict's, default true):
// the inputs of HF's _compute_yarn_parameters, whose frequencies rope.h computes.
// mrope_section (interleaved, as mrope_interleaved says for every Qwen3.5) matters only for
// image prompts: with text positions (the same position on all three axes) M-RoPE is plain
// RoPE over the rotary dims.
//
// Overrides (vLLM's --hf-overrides): a JSON object deep-merged into config.json before it is
// read (objects merge key by key, anything else replaces; RFC 7386, so null removes a key). In
// the multimodal layout the text model reads text_config, so an override of a key that
// text_config holds must be given under text_config: one at the top level is refused, naming
// the key, rather than silently shadowed.
//
// An FP8 checkpoint (Qwen's -FP8 releases) carries "quantization_config": {"quant_method":
// "fp8", "fmt": "e4m3", "weight_block_size": [128, 128], "activation_scheme": "dynamic",
// "modules_to_not_convert": [...]}; it becomes `fp8`. A 4-bit one (Qwen's -GPTQ-Int4
// releases, AutoAWQ's GEMM layout; model/qwen35/int4.h) carries {"quant_method": "gptq",
// "bits": 4, "group_size": 128, "desc_act": false, "sym": true, ...} or {"quant_method": "awq",
// "bits": 4, "group_size": 128, "zero_point": true, "version": "gemm", ...}; it becomes
// `int4`. Other methods, bit widths, formats, block sizes, packings and static activation
// scales are refused, naming the key.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dtype.h"
#include "kvcache/capacity.h"
#include "model/qwen35/vision_config.h"

namespace ds::qwen35 {

enum class LayerKind : uint8_t { deltanet, full_attention };  // HF layer_types: "linear_attention", "full_attention"

// The block-wise FP8 layout of a checkpoint's quantised weights (model/qwen35/fp8.h).
struct Fp8Config {
  int64_t block_rows = 128;
  int64_t block_cols = 128;
  // As listed (HF's "modules_to_not_convert", vLLM's "ignored_layers"). Informational: the
  // loader goes by each tensor's stored dtype (F8_E4M3 + scale, or a float type), because
  // the list's matching rules differ between HF versions (substring, suffix, regex) and a
  // release may share its list with models that have other modules (MoE gates).
  std::vector<std::string> modules_to_not_convert;
};

// The 4-bit layout of a GPTQ or AWQ checkpoint's quantised weights (model/qwen35/int4.h).
enum class Int4Method : uint8_t { gptq, awq };
struct Int4Config {
  Int4Method method = Int4Method::gptq;
  // Input columns per scale and zero; -1 (GPTQ's per-channel) is one group of the whole row.
  int64_t group_size = 128;
  // GPTQ's act order: g_idx assigns the input columns to groups in any order (group_size
  // each); without it, column k is in group k / group_size.
  bool desc_act = false;
  // GPTQ: every zero point is 8 (AWQ: false; each group has its own).
  bool sym = true;
  // GPTQ's checkpoint_format: "gptq" (v1, AutoGPTQ's and GPTQModel's default output) stores
  // zero - 1 in qzeros; "gptq_v2" the zero itself. AWQ stores the zero.
  bool zeros_minus_one = true;
  // As listed (modules_to_not_convert, and GPTQModel's "dynamic" rules, which may only exclude
  // modules: "-:regex": {}). Informational, as for FP8: the loader goes by each weight's
  // stored form (X.qweight ... or X.weight).
  std::vector<std::string> modules_not_quantized;
  const char* method_name() const { return method == Int4Method::gptq ? "gptq" : "awq"; }
};

struct ModelConfig {
  bool multimodal_layout = false;  // config had "text_config"

  int64_t vocab_size = 0;         // V
  int64_t hidden_size = 0;        // H
  int64_t intermediate_size = 0;  // I
  int64_t num_layers = 0;         // L
  double rms_norm_eps = 0;

  // Full attention.
  int64_t num_heads = 0;     // Nq
  int64_t num_kv_heads = 0;  // Nkv
  int64_t head_dim = 0;      // D
  int64_t rotary_dim = 0;    // int(D * partial_rotary_factor), even
  double rope_theta = 0;
  // Interleaved M-RoPE sections (t, h, w) over the rotary_dim / 2 frequencies (rope_parameters'
  // mrope_section; HF's [11, 11, 10] when absent). All zero when they do not fit: such a
  // model takes no images.
  std::array<int64_t, 3> mrope_section{};
  // rope_type "yarn": HF's _compute_yarn_parameters inputs, resolved as it resolves them.
  struct Yarn {
    double factor = 1;
    int64_t original_max_positions = 0;
    double beta_fast = 32;
    double beta_slow = 1;
    double attention_factor = 1;  // multiplies cos and sin
    bool truncate = true;         // the correction range rounded out to whole dims
  };
  std::optional<Yarn> yarn;
  int64_t max_position_embeddings = 0;  // 0 when config.json has none

  // Gated DeltaNet.
  int64_t deltanet_k_heads = 0;  // Hk
  int64_t deltanet_v_heads = 0;  // Hv
  int64_t deltanet_k_dim = 0;    // dk
  int64_t deltanet_v_dim = 0;    // dv
  int64_t conv_kernel = 0;     // Kc

  bool tie_word_embeddings = false;
  // Multi-token-prediction layers of the checkpoint's mtp.* module ("mtp_num_hidden_layers",
  // 0 when absent); loaded only for speculative decoding's "mtp" method (model/qwen35/mtp.h).
  int64_t mtp_layers = 0;
  std::vector<int32_t> eos_token_ids;  // generation_config.json, else config's eos_token_id
  std::optional<Fp8Config> fp8;        // quantization_config of an FP8 checkpoint
  std::optional<Int4Config> int4;      // quantization_config of a GPTQ or AWQ checkpoint
  // The vision tower (vision_config.h), or why there is none this engine can run.
  std::optional<VisionConfig> vision;
  std::string vision_unusable;

  std::vector<LayerKind> layer_kinds;  // [L]
  // Position of layer i among the layers of its kind: its K/V pool index (full attention)
  // or its state layer index (DeltaNet).
  std::vector<int64_t> kind_index;  // [L]

  // The longest context the positions are made for: max_position_embeddings, or with YaRN
  // factor x original_max_position_embeddings when that is more (0: unknown).
  int64_t max_positions() const;

  int64_t num_full_layers() const;
  int64_t num_deltanet_layers() const;
  int64_t deltanet_key_dim() const { return deltanet_k_heads * deltanet_k_dim; }    // Hk*dk
  int64_t deltanet_value_dim() const { return deltanet_v_heads * deltanet_v_dim; }  // Hv*dv
  int64_t conv_dim() const { return 2 * deltanet_key_dim() + deltanet_value_dim(); }

  // K/V and state geometry for the kvcache pools, with K/V stored as kv_dtype and the
  // recurrent state as recurrent_state_dtype (the conv state is f32).
  kvcache::CacheGeometry cache_geometry(DType kv_dtype = DType::f32, DType recurrent_state_dtype = DType::f32) const;

  // Parses config.json text (and generation_config.json text, empty when absent). Throws
  // std::runtime_error naming `source` and the offending key.
  static ModelConfig parse(std::string_view config_json, std::string_view generation_json,
                           const std::string& source = "config.json", std::string_view overrides_json = {});
  // Reads dir/config.json and dir/generation_config.json (optional), with overrides_json (a
  // JSON object, or empty) merged into the former.
  static ModelConfig load(const std::filesystem::path& dir, std::string_view overrides_json = {});

  // config.json's text with overrides_json merged in (what parse reads). Throws
  // std::runtime_error for overrides that are not a JSON object, or that a multimodal
  // config's text_config would shadow.
  static std::string merge_overrides(std::string_view config_json, std::string_view overrides_json,
                                     const std::string& source = "config.json");
};

}  // namespace ds::qwen35
