// Paged attention of the CUDA backend for a mixed batch.
//
// The rows of the plan's leading short sequences (decodes, then verify chunks: the scheduler
// puts them first; cuda_plan.h) go to the paged decode kernel (paged_attention.h) in one
// launch, one query per row: its split-K plan is made and uploaded once per step, at the
// first layer, and reused by the others. Every other sequence -- a prefill chunk, or a
// decode row that sits behind one -- takes the fused prefill kernel (attention_prefill.cu),
// one launch per sequence, reading its cached prefix and the chunk just written from the
// pages.
// A plan with a fixed decode length (a recorded step's, kernels/step_graph.h) takes a work
// list planned for full table rows, kept in a workspace of its own so that eager steps in
// between never rewrite what a recording reads.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_attention.h"

namespace ds::cuda {

void AttentionRunner::run(const kernels::Tensor& q, const kernels::Tensor& k_pool, const kernels::Tensor& v_pool,
                          const CudaBatchPlan& plan, float scale, kernels::Tensor& out) {
  // Shapes and types are the Backend contract's (kernels/backend.cpp).
  const int64_t nkv = k_pool.dim(2), d = q.dim(2);
  KvPoolView pools;
  pools.k = k_pool.data();
  pools.v = v_pool.data();
  pools.k_type = k_pool.dtype();
  pools.v_type = v_pool.dtype();
  pools.num_blocks = k_pool.dim(0);
  pools.block_size = static_cast<int32_t>(k_pool.dim(1));
  pools.n_kv_heads = static_cast<int32_t>(nkv);
  pools.head_dim = static_cast<int32_t>(d);
  if (plan.n_decode > 0) decode(q, pools, plan, scale, out);
  for (int32_t s : plan.prefill_seqs) prefill(s, q, pools, plan, scale, out);
}

void AttentionRunner::decode(const kernels::Tensor& q, const KvPoolView& pools, const CudaBatchPlan& plan, float scale,
                             kernels::Tensor& out) {
  const auto nq = static_cast<int32_t>(q.dim(1));
  const auto key = std::make_tuple(nq, pools.n_kv_heads, pools.head_dim, pools.block_size);
  // Chained (when the backend chains its launches) behind kv_write, itself behind prepare_qk.
  DecodeOptions opts = opts_;
  opts.chained_launch = ctx_.stream().chained;
  auto it = devices_.find(key);
  if (it == devices_.end()) it = devices_.emplace(key, choose_decode_launch(pools, nq, opts)).first;
  const DecodeLaunchConfig& dev = it->second;
  DecodeWorkspace* ws = nullptr;
  if (plan.decode_plan_len > 0) {
    const auto fkey =
        std::make_tuple(plan.n_decode, plan.decode_plan_len, nq, pools.n_kv_heads, pools.head_dim, pools.block_size);
    auto f = fixed_.find(fkey);
    if (f == fixed_.end()) {
      const std::vector<int32_t> lens(static_cast<size_t>(plan.n_decode), plan.decode_plan_len);
      const DecodePlan dp = plan_decode(dev, pools.n_kv_heads, lens);
      auto w = std::make_unique<DecodeWorkspace>(std::max<int32_t>(static_cast<int32_t>(dp.items.size()), 1),
                                                 std::max<int32_t>(plan.n_decode, 1), nq, pools.head_dim);
      w->upload(dp, ctx_.stream());
      f = fixed_.emplace(fkey, std::move(w)).first;
    }
    ws = f->second.get();
  } else if (!ws_valid_ || ws_generation_ != plan.generation || ws_->plan().launch.heads_per_cta != dev.heads_per_cta ||
      ws_->n_q_heads() != nq || ws_->head_dim() != pools.head_dim) {
    const DecodePlan dp = plan_decode(dev, pools.n_kv_heads, plan.decode_lens);
    if (!ws_ || static_cast<int32_t>(dp.items.size()) > ws_->max_items() || plan.n_decode > ws_->max_seqs() ||
        ws_->n_q_heads() != nq || ws_->head_dim() != pools.head_dim) {
      ops::check_cuda(cudaStreamSynchronize(ctx_.stream()), "paged_attention (an earlier op failed)");
      ws_.reset();
      ws_ = std::make_unique<DecodeWorkspace>(std::max<int32_t>(2 * static_cast<int32_t>(dp.items.size()), 1024),
                                              std::max<int32_t>(2 * plan.n_decode, 256), nq, pools.head_dim);
    }
    ws_->upload(dp, ctx_.stream());
    ws_generation_ = plan.generation;
    ws_valid_ = true;
  }
  if (!ws) ws = ws_.get();
  DecodeQuery dq;
  dq.q = q.data();
  dq.q_type = DType::f32;
  dq.out = out.data();
  dq.out_type = out.dtype();
  dq.n_seqs = plan.n_decode;
  dq.n_q_heads = nq;
  dq.scale = scale;
  dq.block_table = plan.d_decode_table;
  dq.block_table_stride = plan.table_stride;
  dq.seq_lens = plan.d_decode_lens;
  paged_attention_decode(pools, dq, *ws, opts, ctx_.stream());
}

void AttentionRunner::prefill(int32_t s, const kernels::Tensor& q, const KvPoolView& pools, const CudaBatchPlan& plan,
                              float scale, kernels::Tensor& out) {
  const auto& sq = plan.seqs()[static_cast<size_t>(s)];
  ops::PrefillAttention a;
  a.q = q.data_as<const float>() + sq.first_row * q.dim(1) * q.dim(2);
  a.out_type = out.dtype();
  a.out = static_cast<uint8_t*>(out.data()) + sq.first_row * ds::row_bytes(out.dtype(), q.dim(1) * q.dim(2));
  a.k_pool = pools.k;
  a.v_pool = pools.v;
  a.k_type = pools.k_type;
  a.v_type = pools.v_type;
  a.k_row_bytes = ds::row_bytes(pools.k_type, pools.head_dim);
  a.v_row_bytes = ds::row_bytes(pools.v_type, pools.head_dim);
  a.block_table = plan.d_table + static_cast<int64_t>(s) * plan.table_stride;
  a.block_size = pools.block_size;
  a.n_cached = sq.n_cached;
  a.n_tokens = sq.n_tokens;
  a.n_q_heads = static_cast<int32_t>(q.dim(1));
  a.n_kv_heads = pools.n_kv_heads;
  a.head_dim = pools.head_dim;
  a.scale = scale;
  const int32_t splits = ops::prefill_attention_splits(a, ctx_.n_sms());
  const size_t floats = ops::prefill_attention_scratch_floats(a, splits);
  auto* scratch = floats ? static_cast<float*>(ctx_.scratch(Scratch::attn_partial, floats * 4)) : nullptr;
  ops::prefill_attention(a, splits, scratch, ctx_.stream());
}

}  // namespace ds::cuda
