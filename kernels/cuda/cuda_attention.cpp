// Paged attention of the CUDA backend for a mixed batch.
//
// The rows of the plan's leading short sequences (decodes, then verify chunks: the scheduler
// puts them first; cuda_plan.h) go to the paged decode kernel (paged_attention.h) in one
// launch, one query per row: its split-K plan is made and uploaded once per step, at the
// first layer, and reused by the others. Every other sequence -- a prefill chunk, or a
// decode row that sits behind one -- takes the prefill path: its K/V rows
// (the cached prefix and the chunk just written) are gathered from the pages into contiguous
// bf16, and per KV head two strided-batched cuBLAS GEMMs (the GQA group's query heads as the
// batch) compute S = Q Kᵀ and O = P V around a causal softmax kernel, in query tiles that keep
// the f32 scores within a fixed scratch budget. Tensor cores do the arithmetic; the scores
// make one trip through memory, which at these sizes costs less than the FLOPs would on CUDA
// cores.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_attention.h"

namespace ds::cuda {
namespace {

// Bytes of f32 scores + bf16 probabilities one prefill tile may use.
constexpr int64_t kTileBudget = int64_t{512} << 20;

int64_t round8(int64_t n) { return (n + 7) / 8 * 8; }

}  // namespace

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
  if (!ws_valid_ || ws_generation_ != plan.generation || ws_->plan().launch.heads_per_cta != dev.heads_per_cta ||
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
  paged_attention_decode(pools, dq, *ws_, opts, ctx_.stream());
}

void AttentionRunner::prefill(int32_t s, const kernels::Tensor& q, const KvPoolView& pools, const CudaBatchPlan& plan,
                              float scale, kernels::Tensor& out) {
  const auto& sq = plan.seqs()[static_cast<size_t>(s)];
  const int64_t T = sq.n_tokens, L = sq.n_cached + sq.n_tokens, row0 = sq.first_row;
  const int64_t nq = q.dim(1), d = q.dim(2), nkv = pools.n_kv_heads, group = nq / nkv;
  const ops::Stream st = ctx_.stream();

  auto* qb = static_cast<uint16_t*>(ctx_.scratch(Scratch::attn_q, static_cast<size_t>(T * nq * d) * 2));
  ops::to_bf16(q.data_as<const float>() + row0 * nq * d, qb, T * nq * d, st);
  auto* kc = static_cast<uint16_t*>(ctx_.scratch(Scratch::attn_k, static_cast<size_t>(L * nkv * d) * 2));
  auto* vc = static_cast<uint16_t*>(ctx_.scratch(Scratch::attn_v, static_cast<size_t>(L * nkv * d) * 2));
  ops::gather_kv(pools.k, pools.k_type, pools.v, pools.v_type, plan.d_table + static_cast<int64_t>(s) * plan.table_stride,
                 pools.block_size, L, nkv, d, kc, vc, st);

  const int64_t ld_max = round8(L);
  const int64_t tq_max = std::max<int64_t>(1, kTileBudget / (nq * ld_max * 6));
  const int64_t n_tiles = (T + tq_max - 1) / tq_max;
  const int64_t tq = (T + n_tiles - 1) / n_tiles;
  auto* scores = static_cast<float*>(ctx_.scratch(Scratch::attn_scores, static_cast<size_t>(nq * tq * ld_max) * 4));
  auto* probs = static_cast<uint16_t*>(ctx_.scratch(Scratch::attn_probs, static_cast<size_t>(nq * tq * ld_max) * 2));
  const bool out_bf16 = out.dtype() == DType::bf16;
  const cudaDataType_t out_type = out_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const int64_t out_elem = out_bf16 ? 2 : 4;
  const float one = 1.0f, zero = 0.0f;

  for (int64_t t0 = 0; t0 < T; t0 += tq) {
    const int64_t tt = std::min(tq, T - t0);
    const int64_t lk = sq.n_cached + t0 + tt;  // keys the tile's last row sees
    const int64_t ld = round8(lk);
    for (int64_t h = 0; h < nkv; ++h) {
      check_cublas(cublasGemmStridedBatchedEx(
                       ctx_.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(lk), static_cast<int>(tt),
                       static_cast<int>(d), &one, kc + h * d, CUDA_R_16BF, static_cast<int>(nkv * d), 0,
                       qb + (t0 * nq + h * group) * d, CUDA_R_16BF, static_cast<int>(nq * d), d, &zero,
                       scores + h * group * tt * ld, CUDA_R_32F, static_cast<int>(ld), tt * ld,
                       static_cast<int>(group), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "paged_attention", "scores GEMM");
    }
    ops::causal_softmax(scores, nq, tt, lk, ld, sq.n_cached + t0, scale, probs, st);
    for (int64_t h = 0; h < nkv; ++h) {
      void* o = static_cast<uint8_t*>(out.data()) + ((row0 + t0) * nq + h * group) * d * out_elem;
      check_cublas(cublasGemmStridedBatchedEx(
                       ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(d), static_cast<int>(tt),
                       static_cast<int>(lk), &one, vc + h * d, CUDA_R_16BF, static_cast<int>(nkv * d), 0,
                       probs + h * group * tt * ld, CUDA_R_16BF, static_cast<int>(ld), tt * ld, &zero, o, out_type,
                       static_cast<int>(nq * d), d, static_cast<int>(group), CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT),
                   "paged_attention", "values GEMM");
    }
  }
}

}  // namespace ds::cuda
