#include "model/qwen35/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/qwen35/checkpoint.h"
#include "model/qwen35/model_workspace.h"
#include "model/qwen35/rope.h"

namespace ds::qwen35 {

using kernels::DeltaNetDims;
using kernels::Shape;
using kernels::Tensor;

std::vector<float> Logits::to_host() const {
  std::vector<float> out(static_cast<size_t>(rows() * vocab_));
  if (!out.empty()) backend_->copy_to_host(tensor_, out);
  return out;
}

void Logits::copy_row(int64_t row, std::span<float> dst) const {
  if (row < 0 || row >= rows()) throw std::out_of_range("Logits::copy_row: row outside the logits");
  backend_->copy_to_host(tensor_.rows(row, 1), dst);
}

std::unique_ptr<Model> Model::load(kernels::Backend& backend, const std::filesystem::path& dir,
                                   const LoadOptions& options) {
  ModelConfig config = ModelConfig::load(dir, options.config_overrides);
  Checkpoint ckpt(dir);
  ModelWeights weights = load_weights(backend, ckpt, config, options);
  return std::make_unique<Model>(backend, std::move(config), std::move(weights));
}

Model::Model(kernels::Backend& backend, ModelConfig config, ModelWeights weights)
    : backend_(&backend), config_(std::move(config)), rope_(rope_params(config_)), weights_(std::move(weights)),
      ws_(std::make_unique<Workspace>()) {
  logits_.backend_ = backend_;
  logits_.vocab_ = config_.vocab_size;
  mtp_logits_.backend_ = backend_;
  mtp_logits_.vocab_ = config_.vocab_size;
}

Model::~Model() = default;

kvcache::CacheGeometry Model::cache_geometry() const {
  kvcache::CacheGeometry g = config_.cache_geometry(backend_->kv_cache_dtype(), backend_->recurrent_state_dtype());
  if (weights_.mtp) ++g.n_attention_layers;  // the MTP layer's pool, after the model's (mtp.h)
  return g;
}

void Model::allocate_cache(const kvcache::PoolSizes& sizes) {
  if (sizes.num_blocks <= 0 || sizes.block_size <= 0 || sizes.num_slots <= 0)
    throw std::invalid_argument("allocate_cache: need at least one block of positive size and one state slot (" +
                                sizes.describe() + ")");
  const auto g = cache_geometry();
  k_pools_.clear();
  v_pools_.clear();
  conv_state_ = Tensor();
  recurrent_state_ = Tensor();
  // Recorded steps pad their batches with sequences that run on blocks and a state slot of
  // their own, past the engine's (model.h).
  pad_blocks_ = static_cast<int32_t>((kernels::kStepGraphMaxChunk + sizes.block_size - 1) / sizes.block_size);
  graphs_.reset();  // recordings read the pools being replaced: enable_step_graphs again
  host_ = {};       // laid out for the pools being replaced: allocate_host_cache again
  const Shape pool{sizes.num_blocks + pad_blocks_, sizes.block_size, g.n_kv_heads, g.head_dim};
  for (int64_t i = 0; i < g.n_attention_layers; ++i) {
    k_pools_.push_back(backend_->alloc(g.k_dtype, pool));
    v_pools_.push_back(backend_->alloc(g.v_dtype, pool));
    backend_->fill_zero(k_pools_.back());
    backend_->fill_zero(v_pools_.back());
  }
  const auto& s = g.state;
  const int64_t slots = int64_t{sizes.num_slots} + sizes.num_snapshots;
  const int64_t all_slots = slots + 1;
  conv_state_ = backend_->alloc(s.conv_dtype, Shape{all_slots, s.n_layers, s.conv_dim, s.conv_taps});
  recurrent_state_ = backend_->alloc(s.recurrent_dtype, Shape{all_slots, s.n_layers, s.value_heads, s.key_dim, s.value_dim});
  backend_->fill_zero(conv_state_);
  backend_->fill_zero(recurrent_state_);
  num_blocks_ = sizes.num_blocks;
  block_size_ = sizes.block_size;
  num_slots_ = static_cast<int32_t>(slots);
  pad_slot_ = num_slots_;
}

void Model::copy_state_slot(kvcache::SlotId from, kvcache::SlotId to) {
  if (from < 0 || from >= num_slots_ || to < 0 || to >= num_slots_ || from == to)
    throw std::out_of_range("copy_state_slot: slots " + std::to_string(from) + " -> " + std::to_string(to) +
                            " outside the " + std::to_string(num_slots_) + " allocated, or the same");
  const Tensor conv_src = conv_state_.rows(from, 1);
  const Tensor rec_src = recurrent_state_.rows(from, 1);
  Tensor conv_dst = conv_state_.rows(to, 1);
  Tensor rec_dst = recurrent_state_.rows(to, 1);
  backend_->copy(conv_src, conv_dst);
  backend_->copy(rec_src, rec_dst);
}

void Model::zero_state_slot(kvcache::SlotId slot) {
  if (slot < 0 || slot >= num_slots_)
    throw std::out_of_range("zero_state_slot: slot " + std::to_string(slot) + " outside the " +
                            std::to_string(num_slots_) + " allocated");
  Tensor conv = conv_state_.rows(slot, 1);
  Tensor rec = recurrent_state_.rows(slot, 1);
  backend_->fill_zero(conv);
  backend_->fill_zero(rec);
}

kvcache::StatePool::ZeroFn Model::state_zero_fn() {
  return [this](kvcache::SlotId slot) { zero_state_slot(slot); };
}

Tensor Model::conv_state(kvcache::SlotId slot, int64_t deltanet_layer) const {
  const auto& s = cache_geometry().state;
  if (slot < 0 || slot >= num_slots_ || deltanet_layer < 0 || deltanet_layer >= s.n_layers)
    throw std::out_of_range("conv_state: slot or layer outside the state");
  return conv_state_.rows(slot, 1)
      .reshape(Shape{s.n_layers, s.conv_dim, s.conv_taps})
      .rows(deltanet_layer, 1)
      .reshape(Shape{s.conv_dim, s.conv_taps});
}

Tensor Model::recurrent_state(kvcache::SlotId slot, int64_t deltanet_layer) const {
  const auto& s = cache_geometry().state;
  if (slot < 0 || slot >= num_slots_ || deltanet_layer < 0 || deltanet_layer >= s.n_layers)
    throw std::out_of_range("recurrent_state: slot or layer outside the state");
  return recurrent_state_.rows(slot, 1)
      .reshape(Shape{s.n_layers, s.value_heads, s.key_dim, s.value_dim})
      .rows(deltanet_layer, 1)
      .reshape(Shape{s.value_heads, s.key_dim, s.value_dim});
}

Model::Workspace& Model::workspace(int64_t rows, int64_t logit_rows) {
  Workspace& w = *ws_;
  const auto& c = config_;
  auto& be = *backend_;
  if (rows > w.rows) {
    const int64_t n = rows;
    const auto f32 = DType::f32;
    const auto act = be.activation_dtype();
    w.h = be.alloc(f32, Shape{n, c.hidden_size});
    w.x = be.alloc(act, Shape{n, c.hidden_size});
    w.qg = be.alloc(f32, Shape{n, c.num_heads, 2 * c.head_dim});
    w.q = be.alloc(f32, Shape{n, c.num_heads, c.head_dim});
    w.gate = be.alloc(f32, Shape{n, c.num_heads, c.head_dim});
    w.k = be.alloc(f32, Shape{n, c.num_kv_heads, c.head_dim});
    w.v = be.alloc(f32, Shape{n, c.num_kv_heads, c.head_dim});
    w.attn = be.alloc(act, Shape{n, c.num_heads, c.head_dim});
    w.mixed = be.alloc(f32, Shape{n, c.conv_dim()});
    w.conv = be.alloc(f32, Shape{n, c.conv_dim()});
    w.z = be.alloc(f32, Shape{n, c.deltanet_v_heads, c.deltanet_v_dim});
    w.a = be.alloc(f32, Shape{n, c.deltanet_v_heads});
    w.b = be.alloc(f32, Shape{n, c.deltanet_v_heads});
    w.core = be.alloc(f32, Shape{n, c.deltanet_v_heads, c.deltanet_v_dim});
    w.y = be.alloc(act, Shape{n, c.deltanet_v_heads, c.deltanet_v_dim});
    // The stacked projections' fused output and the MLP's gate_up share one buffer: they
    // are never live at once.
    const int64_t proj_cols = std::max({2 * c.intermediate_size, c.conv_dim() + c.deltanet_v_heads * (c.deltanet_v_dim + 2),
                                        2 * (c.num_heads + c.num_kv_heads) * c.head_dim});
    w.proj = be.alloc(f32, Shape{n * proj_cols});
    w.act = be.alloc(act, Shape{n, c.intermediate_size});
    if (weights_.mtp) w.hidden = be.alloc(f32, Shape{n, c.hidden_size});
    if (lora_) lora_tmp_ = be.alloc(f32, Shape{n * lora_->max_group_rank()});
    w.rows = n;
    ++ws_generation_;
  }
  if (logit_rows > w.logit_rows) {
    w.last = be.alloc(DType::f32, Shape{logit_rows, c.hidden_size});
    w.last_n = be.alloc(be.activation_dtype(), Shape{logit_rows, c.hidden_size});
    w.logits = be.alloc(DType::f32, Shape{logit_rows, c.vocab_size});
    w.logit_rows = logit_rows;
    ++ws_generation_;
  }
  return w;
}

std::unique_ptr<kernels::BatchPlan> Model::make_plan(std::span<const SequenceChunk> seqs) {
  return backend_->plan(kernels::BatchDesc{.seqs = seqs, .block_size = block_size_, .num_blocks = num_blocks_,
                                           .num_slots = num_slots_, .vocab_size = config_.vocab_size});
}

const Logits& Model::forward(const ForwardBatch& batch) {
  if (k_pools_.empty() && conv_state_.empty())
    throw std::logic_error("Model::forward: allocate_cache() has not been called");
  target_rows_ = 0;  // the MTP module's source is rewritten
  overrides_.clear();
  // Image rows (forward_batch.h): checked here, copied over the token embeddings in run_step.
  if (!batch.embeddings.empty() && batch.embeddings.size() != batch.seqs.size())
    throw std::invalid_argument("forward batch: embedding rows for " + std::to_string(batch.embeddings.size()) +
                                " of " + std::to_string(batch.seqs.size()) + " sequences");
  bool plain = true;
  int64_t first = 0;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SequenceChunk& s = batch.seqs[i];
    const std::string who = "forward batch: sequence " + std::to_string(i);
    const int64_t n = s.n_tokens();
    int64_t after = 0;
    if (!batch.embeddings.empty())
      for (const EmbeddingRows& e : batch.embeddings[i]) {
        if (e.row < after || e.embeddings.empty() || e.embeddings.rank() != 2 || e.row + e.embeddings.dim(0) > n ||
            e.embeddings.dim(1) != config_.hidden_size || e.embeddings.dtype() != DType::f32)
          throw std::invalid_argument(who + " has embedding rows that are out of order, outside the chunk or not [n, " +
                                      std::to_string(config_.hidden_size) + "] f32");
        after = e.row + e.embeddings.dim(0);
        overrides_.push_back({first + e.row, e.embeddings});
      }
    if ((!s.mrope_positions.empty() || s.rope_delta != 0) && config_.mrope_section == std::array<int64_t, 3>{})
      throw std::invalid_argument(who + " has M-RoPE positions, which this model's config does not define");
    plain = plain && s.mrope_positions.empty();
    first += n;
  }
  // Recorded steps carry neither other embeddings nor M-RoPE positions: such steps run
  // eagerly. A rope_delta alone (the decode of an image prompt) only shifts the positions
  // RoPE reads from the plan, so it records like text.
  plain = plain && overrides_.empty();
  note_lora_slots(batch.seqs);
  if (graphs_ && !observer_ && plain && forward_recorded(batch)) return logits_;
  const std::unique_ptr<kernels::BatchPlan> plan = make_plan(batch.seqs);  // validates every index
  const int64_t T = plan->num_rows(), R = static_cast<int64_t>(plan->logit_rows().size());
  workspace(T, R);
  run_step(*plan, T, R);
  return logits_;
}

void Model::run_step(const kernels::BatchPlan& plan, int64_t T, int64_t R) {
  Workspace& ws = *ws_;
  auto& be = *backend_;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  Tensor h = ws.h.rows(0, T);
  Tensor x = ws.x.rows(0, T);

  be.embedding(weights_.embed, plan, h);
  for (const auto& [row, e] : overrides_) {
    Tensor dst = h.rows(row, e.dim(0));
    be.copy(e, dst);
  }
  overrides_.clear();
  if (observer_) observer_(0, h);
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const LayerWeights& L = weights_.layers[static_cast<size_t>(i)];
    be.rms_norm(h, L.input_norm, eps, x);
    if (L.kind == LayerKind::full_attention)
      run_attention(L.attn, config_.kind_index[static_cast<size_t>(i)], i, plan, ws);
    else
      run_deltanet(i, plan, ws);
    be.rms_norm(h, L.post_norm, eps, x);
    run_mlp(L, i, plan, ws);
    if (observer_) observer_(static_cast<int>(i + 1), h);
  }
  if (weights_.mtp) {
    // Every row's hidden state, what the MTP module reads (mtp.h).
    Tensor hidden = ws.hidden.rows(0, T);
    be.rms_norm(h, weights_.final_norm, eps, hidden);
    target_rows_ = T;
  }
  if (observer_) {
    be.rms_norm(h, weights_.final_norm, eps, x);
    observer_(static_cast<int>(config_.num_layers + 1), x);
  }

  logits_.tensor_ = Tensor();
  if (R > 0) {
    Tensor last = ws.last.rows(0, R);
    Tensor last_n = ws.last_n.rows(0, R);
    Tensor logits = ws.logits.rows(0, R);
    be.gather_rows(h, plan, last);
    be.rms_norm(last, weights_.final_norm, eps, last_n);
    be.gemm(last_n, weights_.lm_head, logits, false);
    logits_.tensor_ = logits;
  }
}

void Model::run_attention(const AttentionWeights& w, int64_t pool, int64_t layer, const kernels::BatchPlan& plan,
                          Workspace& ws) {
  const auto& c = config_;
  auto& be = *backend_;
  const int64_t T = plan.num_rows();
  const float eps = static_cast<float>(c.rms_norm_eps);
  Tensor x = ws.x.rows(0, T);
  Tensor qg = ws.qg.rows(0, T);
  Tensor q = ws.q.rows(0, T), gate = ws.gate.rows(0, T);
  Tensor k = ws.k.rows(0, T), v = ws.v.rows(0, T);
  Tensor attn = ws.attn.rows(0, T);
  Tensor qg2 = qg.reshape(Shape{T, c.num_heads * 2 * c.head_dim});
  Tensor k2 = k.reshape(Shape{T, c.num_kv_heads * c.head_dim});
  Tensor v2 = v.reshape(Shape{T, c.num_kv_heads * c.head_dim});
  Tensor h = ws.h.rows(0, T);

  Tensor outputs[] = {qg2, k2, v2};
  project(x, w.qkv_proj, outputs, ws);
  apply_lora(layer, x, plan,
             {{LoraTarget::q_proj, outputs[0]}, {LoraTarget::k_proj, outputs[1]}, {LoraTarget::v_proj, outputs[2]}});
  qg = outputs[0].reshape(qg.shape());
  k = outputs[1].reshape(k.shape());
  v = outputs[2].reshape(v.shape());
  be.prepare_qk(qg, w.q_norm, w.k_norm, eps, plan, rope_, q, gate, k);
  be.kv_write(k, v, plan, k_pools_[static_cast<size_t>(pool)], v_pools_[static_cast<size_t>(pool)]);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  be.paged_attention(q, k_pools_[static_cast<size_t>(pool)], v_pools_[static_cast<size_t>(pool)], plan,
                     scale, attn);
  be.sigmoid_gate(attn, gate);
  const Tensor attn2 = attn.reshape(Shape{T, c.num_heads * c.head_dim});
  be.gemm(attn2, w.o_proj, h, true);
  apply_lora(layer, attn2, plan, {{LoraTarget::o_proj, h}});
}

void Model::run_deltanet(int64_t layer, const kernels::BatchPlan& plan, Workspace& ws) {
  const auto& c = config_;
  const DeltaNetWeights& w = weights_.layers[static_cast<size_t>(layer)].deltanet;
  auto& be = *backend_;
  const int64_t T = plan.num_rows();
  const int64_t state_layer = c.kind_index[static_cast<size_t>(layer)];
  Tensor x = ws.x.rows(0, T);
  Tensor mixed = ws.mixed.rows(0, T), conv = ws.conv.rows(0, T);
  Tensor z = ws.z.rows(0, T), a = ws.a.rows(0, T), b = ws.b.rows(0, T);
  Tensor core = ws.core.rows(0, T), y = ws.y.rows(0, T);
  Tensor h = ws.h.rows(0, T);
  const Shape flat{T, c.deltanet_value_dim()};

  Tensor outputs[] = {mixed, z.reshape(flat), b, a};
  if (w.in_proj_ba.empty()) {
    project(x, w.in_proj, outputs, ws);
  } else {
    // FP8-resident [qkv; z] and the bf16 [b; a] (weights.h): two stacks, the second one's
    // fused output after the first's.
    project(x, w.in_proj, std::span<Tensor>(outputs).first(2), ws);
    project(x, w.in_proj_ba, std::span<Tensor>(outputs).last(2), ws, T * w.in_proj.dim(0));
  }
  apply_lora(layer, x, plan,
             {{LoraTarget::in_proj_qkv, outputs[0]}, {LoraTarget::in_proj_z, outputs[1]},
              {LoraTarget::in_proj_b, outputs[2]}, {LoraTarget::in_proj_a, outputs[3]}});
  mixed = outputs[0];
  z = outputs[1].reshape(z.shape());
  b = outputs[2];
  a = outputs[3];
  be.causal_conv1d(mixed, w.conv1d, conv_state_, state_layer, plan, conv);
  const DeltaNetDims dims{c.deltanet_k_heads, c.deltanet_v_heads, c.deltanet_k_dim, c.deltanet_v_dim};
  be.gated_delta_rule(conv, a, b, w.a_log, w.dt_bias, recurrent_state_, state_layer, plan, dims, core);
  be.gated_rms_norm(core, z, w.norm, static_cast<float>(c.rms_norm_eps), y);
  const Tensor y_flat = y.reshape(flat);
  be.gemm(y_flat, w.out_proj, h, true);
  apply_lora(layer, y_flat, plan, {{LoraTarget::out_proj, h}});
}

void Model::project(const Tensor& x, const Tensor& stacked, std::span<Tensor> outputs, Workspace& ws,
                    int64_t proj_offset) {
  auto& be = *backend_;
  const int64_t T = x.dim(0);
  if (T <= be.fused_projection_rows()) {
    Tensor fused = ws.proj.rows(proj_offset, T * stacked.dim(0)).reshape(Shape{T, stacked.dim(0)});
    be.gemm(x, stacked, fused, false);
    if (T > 1) {
      be.split_columns(fused, outputs);
      return;
    }
    // One row: each output's columns are a contiguous run of the fused row, so the outputs
    // become views of it and nothing is copied.
    int64_t first = 0;
    for (auto& out : outputs) {
      const int64_t n = out.numel();
      out = ws.proj.rows(proj_offset + first, n).reshape(out.shape());
      first += n;
    }
    if (first != stacked.dim(0)) throw std::logic_error("Model::project: outputs do not cover the stacked weight");
    return;
  }
  int64_t first = 0;
  for (auto& out : outputs) {
    const int64_t n = out.numel() / T;
    Tensor flat = out.reshape(Shape{T, n});
    be.gemm(x, stacked.rows(first, n), flat, false);
    first += n;
  }
  if (first != stacked.dim(0)) throw std::logic_error("Model::project: outputs do not cover the stacked weight");
}

void Model::run_mlp(const LayerWeights& L, int64_t layer, const kernels::BatchPlan& plan, Workspace& ws) {
  auto& be = *backend_;
  const int64_t rows = plan.num_rows(), I = config_.intermediate_size;
  Tensor x = ws.x.rows(0, rows), h = ws.h.rows(0, rows);
  Tensor gate_up = ws.proj.rows(0, rows * 2 * I).reshape(Shape{rows, 2 * I});
  Tensor act = ws.act.rows(0, rows);
  if (lora_active(layer, LoraTarget::gate_proj) || lora_active(layer, LoraTarget::up_proj)) {
    // The adapters' updates go between the projection and SwiGLU: unfused.
    be.gemm(x, L.gate_up, gate_up, false);
    apply_lora(layer, x, plan, {{LoraTarget::gate_proj, gate_up, 0}, {LoraTarget::up_proj, gate_up, I}});
    be.swiglu(gate_up, act);
  } else {
    be.gate_up_swiglu(x, L.gate_up, gate_up, act);
  }
  be.gemm(act, L.down, h, true);
  apply_lora(layer, act, plan, {{LoraTarget::down_proj, h}});
}

}  // namespace ds::qwen35
