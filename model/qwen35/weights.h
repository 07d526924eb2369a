// ModelWeights: every tensor of the text decoder, uploaded to a backend and checked.
//
// load_weights() walks the checkpoint by the names of the layout it uses (model.* or
// model.language_model.*), checks each tensor's shape against the config, and fails naming
// the file and tensor when one is missing, mis-shaped or left over (model.visual.* is skipped
// on purpose, and mtp.* unless LoadOptions::mtp asks for the MTP module). Projections that read the same input are stacked into one weight
// (rows of each in turn), so a backend may compute them as one GEMM: the MLP's gate_proj and
// up_proj ([2I, H], gate rows first), the attention's q/k/v_proj and the DeltaNet's
// in_proj_qkv/z/b/a. Each original weight stays addressable as a row range of the stacked one
// (Tensor::rows), with no copy. lm_head falls back to the embedding when tie_word_embeddings is
// set and the checkpoint has no lm_head.weight.
//
// FP8 (model/qwen35/fp8.h): a tensor stored as F8_E4M3 is read with its `<name>_scale_inv`
// (one f32 or bf16 scale per block of config.fp8). A backend that keeps FP8 weights
// (Backend::fp8_weights: CUDA) gets the codes and scales as they are (fp8_e4m3 tensors; a
// stack of FP8 parts stays FP8, see kernels::Fp8Scales for its scales); any other backend
// gets the values, dequantised to f32 on the host (what a bf16 checkpoint holding them would
// give; the CPU keeps f32). LoadOptions::quantization = fp8 gives a bf16/f32 checkpoint the
// same treatment at load time: the linear weights an FP8 release quantises (q/k/v/o_proj,
// gate/up/down_proj, the DeltaNet's in_proj_qkv, in_proj_z and out_proj; not the embedding,
// lm_head, norms, conv1d, A_log, dt_bias or the small in_proj_a/b, which Qwen's releases keep
// in bf16) are block-quantised.
//
// INT4 (model/qwen35/int4.h): a linear weight stored as GPTQ or AWQ tensors (X.qweight,
// X.qzeros, X.scales, X.g_idx instead of X.weight) is read as config.int4 says. A backend that
// keeps 4-bit weights (Backend::int4_weights: CUDA) gets the codes with their group scales and
// zeros (int4 tensors; a stack of int4 parts with one group size and column order stays int4);
// any other gets the values, dequantised to f32 on the host. Which weights are quantised is
// the checkpoint's business (Qwen's releases leave the embedding, lm_head, norms, conv1d, the
// DeltaNet's in_proj_a/b and, in some, more in bf16): each weight loads as it is stored.
// Where a DeltaNet's in_proj_qkv or in_proj_z stays quantised (FP8 or int4), its unquantised
// in_proj_b/a are stacked apart (in_proj_ba), so the quantised stack holds quantised rows only.
// The embedding is always uploaded as values (the backend's embedding reads rows of values);
// MTP's fc too (it is cut into column halves).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/backend.h"
#include "model/qwen35/checkpoint.h"
#include "model/qwen35/config.h"

namespace ds::qwen35 {

struct AttentionWeights {
  // [2*Nq*D + 2*Nkv*D, H] = [q_proj; k_proj; v_proj]; q_proj per head: D query rows then D
  // gate rows.
  kernels::Tensor qkv_proj;
  kernels::Tensor o_proj;  // [H, Nq*D]
  kernels::Tensor q_norm;  // [D], applied as 1 + w
  kernels::Tensor k_norm;  // [D], applied as 1 + w
};

struct DeltaNetWeights {
  // [conv_dim + Hv*dv + 2*Hv, H] = [in_proj_qkv; in_proj_z; in_proj_b; in_proj_a], or, where
  // those stay quantised, [conv_dim + Hv*dv, H] = [in_proj_qkv; in_proj_z] and in_proj_ba.
  kernels::Tensor in_proj;
  kernels::Tensor in_proj_ba;   // [2*Hv, H] = [in_proj_b; in_proj_a] (quantised in_proj only)
  kernels::Tensor conv1d;       // [conv_dim, 1, Kc]
  kernels::Tensor dt_bias;      // [Hv]
  kernels::Tensor a_log;        // [Hv]
  kernels::Tensor norm;         // [dv], applied as plain w
  kernels::Tensor out_proj;     // [H, Hv*dv]
};

struct LayerWeights {
  LayerKind kind = LayerKind::deltanet;
  kernels::Tensor input_norm;  // [H], 1 + w
  kernels::Tensor post_norm;   // [H], 1 + w
  AttentionWeights attn;       // full-attention layers only
  DeltaNetWeights deltanet;    // DeltaNet layers only
  kernels::Tensor gate_up;     // [2I, H] = [gate_proj; up_proj]
  kernels::Tensor down;        // [H, I]
};

// The multi-token-prediction module (model/qwen35/mtp.h), mtp.* in the checkpoint. It shares
// the model's embedding and lm_head. mtp.fc.weight [H, 2H] reads the concatenation
// [normed embedding; normed hidden state]; it is kept as its two column halves, so the
// concatenation is never built: fc(x) = e · fc_embeddingᵀ + h · fc_hiddenᵀ.
struct MtpWeights {
  kernels::Tensor pre_fc_norm_embedding;  // [H], 1 + w
  kernels::Tensor pre_fc_norm_hidden;     // [H], 1 + w
  kernels::Tensor fc_embedding;           // [H, H], mtp.fc.weight's columns [0, H)
  kernels::Tensor fc_hidden;              // [H, H], its columns [H, 2H)
  LayerWeights layer;                     // mtp.layers.0: a full-attention decoder layer
  kernels::Tensor norm;                   // [H], 1 + w
  // With LoadOptions::mtp_draft_tokens: lm_head's rows of those ids, in their order [N, H],
  // the head the module drafts through (MtpBatch::draft_tokens).
  kernels::Tensor draft_head;
};

struct ModelWeights {
  kernels::Tensor embed;       // [V, H]
  kernels::Tensor final_norm;  // [H], 1 + w
  kernels::Tensor lm_head;     // [V, H] (the embedding when tied)
  std::vector<LayerWeights> layers;
  std::optional<MtpWeights> mtp;  // when loaded (LoadOptions::mtp)
};

// serve --quantization, as vLLM spells it.
enum class Quantization : uint8_t { none, fp8, gptq, awq };
// "none", "fp8", "gptq" or "awq"; std::invalid_argument naming them otherwise.
Quantization parse_quantization(std::string_view s);

struct LoadOptions {
  // fp8: quantise the linear weights of a bf16/f32 checkpoint at load time (serve
  // --quantization fp8). A no-op on a checkpoint that is already FP8 (config.fp8 set); refused
  // on a GPTQ or AWQ one. gptq / awq: the checkpoint must be one (its quantization_config says
  // so), which loads as stored; anything else is refused, naming what it is.
  Quantization quantization = Quantization::none;
  // Load the MTP module (speculative decoding's "mtp" method). A checkpoint without one
  // (config.json's mtp_num_hidden_layers, the mtp.* tensors) is refused with a message
  // saying so; only one MTP layer (every released checkpoint's) is supported.
  bool mtp = false;
  // With mtp: the token ids the module drafts among (a token map: serve's
  // --speculative-config draft_token_map), each below the vocabulary; their lm_head rows are
  // gathered at load, so the copy counts with the weights. Empty: none.
  std::vector<int32_t> mtp_draft_tokens;
  // A JSON object deep-merged into config.json before it is read (serve --hf-overrides;
  // config.h). Empty: none.
  std::string config_overrides;
};

// Uploads and checks the whole text decoder of ckpt. Throws std::runtime_error naming the
// file and tensor at fault.
ModelWeights load_weights(kernels::Backend& backend, const Checkpoint& ckpt, const ModelConfig& config,
                          const LoadOptions& options = {});

}  // namespace ds::qwen35
