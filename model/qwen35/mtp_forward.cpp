// Model::forward_mtp: the MTP module's step (mtp.h), through the same Backend ops as the
// model's own layers.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/qwen35/model_workspace.h"

namespace ds::qwen35 {

using kernels::Shape;
using kernels::Tensor;

namespace {

// t as a buffer of at least `rows` rows of `cols`; a bigger one replaces it (contents lost).
void ensure_rows(kernels::Backend& be, Tensor& t, int64_t rows, int64_t cols) {
  if (t.empty() || t.dim(0) < rows) t = be.alloc(DType::f32, Shape{rows, cols});
}

}  // namespace

int64_t Model::mtp_vocab(int64_t requested) const {
  const int64_t V = config_.vocab_size, align = 128;  // an FP8 lm_head's row blocks
  if (requested <= 0 || requested >= V) return V;
  return std::min(V, (requested + align - 1) / align * align);
}

const Logits& Model::forward_mtp(const MtpBatch& batch) {
  if (!weights_.mtp) throw std::logic_error("Model::forward_mtp: the MTP module is not loaded");
  if (k_pools_.empty()) throw std::logic_error("Model::forward_mtp: allocate_cache() has not been called");
  const MtpWeights& m = *weights_.mtp;
  const int64_t H = config_.hidden_size;
  const int64_t source_rows = batch.source == MtpSource::target ? target_rows_ : module_rows_;
  std::vector<SequenceChunk> spans;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const MtpChunk& s = batch.seqs[i];
    const auto n = static_cast<int64_t>(s.tokens.size());
    if (s.hidden_row < 0 || s.hidden_row + n > source_rows)
      throw std::invalid_argument("MTP batch: sequence " + std::to_string(i) + " reads hidden rows [" +
                                  std::to_string(s.hidden_row) + ", " + std::to_string(s.hidden_row + n) +
                                  ") of a source holding " + std::to_string(source_rows));
    spans.push_back(SequenceChunk{s.tokens, s.n_cached, s.block_ids, s.state_slot, s.logits && n > 0 ? 1 : 0});
  }
  const std::unique_ptr<kernels::BatchPlan> plan = make_plan(spans);

  auto& be = *backend_;
  if (!mtp_ws_) mtp_ws_ = std::make_unique<MtpWorkspace>();
  MtpWorkspace& mw = *mtp_ws_;
  const int64_t T = plan->num_rows(), R = static_cast<int64_t>(plan->logit_rows().size());
  // The hidden states first: growing a buffer loses its contents, the source's included.
  ensure_rows(be, mw.in, T, H);
  const Tensor& source = batch.source == MtpSource::target ? ws_->hidden : mw.out;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const MtpChunk& s = batch.seqs[i];
    const auto& q = plan->seqs()[i];
    Tensor dst = mw.in.rows(q.first_row, q.n_tokens);
    be.copy(source.rows(s.hidden_row, q.n_tokens), dst);
  }
  Workspace& ws = workspace(T, 0);
  ensure_rows(be, mw.embed, T, H);
  ensure_rows(be, mw.out, T, H);
  module_rows_ = 0;  // the output buffer is being rewritten
  const float eps = static_cast<float>(config_.rms_norm_eps);
  Tensor h = ws.h.rows(0, T), x = ws.x.rows(0, T);
  Tensor embed = mw.embed.rows(0, T), in = mw.in.rows(0, T), out = mw.out.rows(0, T);

  // fc([norm(embedding); norm(hidden)]) as the sum of its two column halves' products.
  be.embedding(weights_.embed, *plan, embed);
  be.rms_norm(embed, m.pre_fc_norm_embedding, eps, x);
  be.gemm(x, m.fc_embedding, h, false);
  be.rms_norm(in, m.pre_fc_norm_hidden, eps, x);
  be.gemm(x, m.fc_hidden, h, true);
  // One full-attention decoder layer, its K/V in the pool after the model's.
  be.rms_norm(h, m.layer.input_norm, eps, x);
  run_attention(m.layer.attn, config_.num_full_layers(), -1, *plan, ws);
  be.rms_norm(h, m.layer.post_norm, eps, x);
  run_mlp(m.layer, -1, *plan, ws);
  be.rms_norm(h, m.norm, eps, out);
  module_rows_ = T;

  mtp_logits_.tensor_ = Tensor();
  if (batch.draft_tokens && m.draft_head.empty())
    throw std::invalid_argument("MTP batch: asks for the draft token map, but the model was loaded without one");
  // The head: the token map's gathered rows, or the first V rows of lm_head (token ids [0, V)).
  const Tensor head = batch.draft_tokens ? m.draft_head : weights_.lm_head.rows(0, mtp_vocab(batch.vocab));
  const int64_t V = head.dim(0);
  mtp_logits_.vocab_ = V;
  if (R > 0) {
    ensure_rows(be, mw.last, R, H);
    // One flat buffer of the whole vocabulary's rows, viewed as [R, V]: a pruned vocabulary's
    // logits are contiguous rows of V.
    if (mw.logits.empty() || mw.logits.numel() < R * config_.vocab_size)
      mw.logits = be.alloc(DType::f32, Shape{R * config_.vocab_size});
    Tensor last = mw.last.rows(0, R), logits = mw.logits.rows(0, R * V).reshape(Shape{R, V});
    be.gather_rows(out, *plan, last);
    be.gemm(last, head, logits, false);
    mtp_logits_.tensor_ = logits;
  }
  return mtp_logits_;
}

}  // namespace ds::qwen35
