// Model::Workspace, private to the model's sources (model.cpp, mtp_forward.cpp).
#pragma once

#include <map>
#include <memory>
#include <tuple>

#include "model/qwen35/model.h"

namespace ds::qwen35 {

// Activation buffers for up to `rows` tokens, grown when a bigger batch comes. Each step
// uses views of their first rows. The GEMM inputs (x, attn, y, act, last_n) are in the
// backend's activation_dtype(), everything else f32 (backend.h).
struct Model::Workspace {
  using Tensor = kernels::Tensor;
  int64_t rows = 0;
  int64_t logit_rows = 0;
  Tensor h;         // [rows, H] residual stream
  Tensor x;         // [rows, H] normed input of a mixer / the MLP
  Tensor qg;        // [rows, Nq, 2D] gated q_proj output
  Tensor q, gate;   // [rows, Nq, D]
  Tensor k, v;      // [rows, Nkv, D]
  Tensor attn;      // [rows, Nq, D]
  Tensor mixed;     // [rows, conv_dim] DeltaNet in_proj_qkv output (pre-conv)
  Tensor conv;      // [rows, conv_dim] after conv + SiLU
  Tensor z;         // [rows, Hv, dv]
  Tensor a, b;      // [rows, Hv]
  Tensor core;      // [rows, Hv, dv] delta-rule output
  Tensor y;         // [rows, Hv, dv] after the gated norm
  Tensor proj;      // flat: [rows, 2I] MLP gate_up, or a layer's fused input projections
  Tensor act;       // [rows, I]
  Tensor hidden;    // [rows, H] f32: the last layer's output after the final norm (with the MTP module)
  Tensor last;      // [logit rows, H]
  Tensor last_n;    // [logit rows, H] after the final norm
  Tensor logits;    // [logit rows, V]
};

// The MTP module's own buffers (forward_mtp), besides the Workspace's, which it reuses for
// the decoder layer: kept apart so the module's output survives as the next chain step's
// input, and the target's logits and hidden states survive the module's steps.
struct Model::MtpWorkspace {
  using Tensor = kernels::Tensor;
  Tensor in;      // [rows, H] f32: each row's hidden state, copied from its source
  Tensor embed;   // [rows, H] f32
  Tensor out;     // [rows, H] f32: the module's output after its norm (MtpSource::module)
  Tensor last;    // [logit rows, H] f32
  Tensor logits;  // [logit rows * V] f32, viewed as [logit rows, the step's vocabulary]
};

// The recorded steps (step_graphs.cpp), by shape: (batch, tokens per sequence, row states
// per sequence, logit rows per sequence, table width, whether any sequence has an adapter).
struct Model::StepGraphs {
  using Key = std::tuple<int32_t, int64_t, int64_t, int32_t, int32_t, bool>;
  struct Entry {
    bool warm = false;    // a step of this shape has run eagerly (every buffer is sized)
    bool failed = false;  // recording failed: the shape runs eagerly from now on
    std::unique_ptr<kernels::StepGraph> graph;
    uint64_t ws_generation = 0;  // the workspace the recording reads
  };
  StepGraphOptions options;
  int32_t table_blocks = 0;  // the widest table (options.max_seq_len)
  std::map<Key, Entry> entries;
  StepGraphStats stats;
};

}  // namespace ds::qwen35
