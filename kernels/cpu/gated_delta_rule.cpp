// The Gated DeltaNet core: gates, L2 norms and the delta rule, token by token.
//
// Per sequence and value head j (k head j / (Hv/Hk), HF's repeat_interleave grouping), each
// token does, with S the head's [dk, dv] state (key index = rows):
//   q, k  <- x * rsqrt(sum(x²) + 1e-6); q <- q * dk^-1/2
//   beta  = sigmoid(b_j);  g = -exp(A_log_j) * softplus(a_j + dt_bias_j)  (softplus(x) = x above 20)
//   S <- exp(g) S;  u = Sᵀk;  S <- S + k (beta (v - u))ᵀ;  o = Sᵀq   (decay first, read after update)
// Prefill runs this same loop over the chunk rather than HF's chunked (WY) form: on a CPU the
// recurrence is a small share of the work, and it makes a prefilled state identical to the
// one per-token decode leaves. The scalar gate maths is done in double. Row-state slots and
// snapshot slots (batch_plan.h) get a copy of S after their row. A bf16 state
// (Backend::recurrent_state_dtype) is widened for the sequence's chunk and rounded where the
// chunk stores it, as the CUDA kernels do.
//
// Work item = (sequence, value head), each owning its state matrix.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/half.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/vec.h"

namespace ds::kernels::cpu {

namespace {

// One token of one head on its [dk, dv] state: decay, delta-rule update, read with q.
// u and delta are dv-float scratch.
DS_CPU_CLONES void delta_step(float* state, const float* qn, const float* kn, const float* v, float beta,
                              float decay, int64_t dk, int64_t dv, float* u, float* delta, float* o) {
  std::fill(u, u + dv, 0.0f);
  for (int64_t i = 0; i < dk; ++i) {
    float* srow = state + i * dv;
    scale(decay, srow, dv);
    axpy(kn[i], srow, u, dv);
  }
  for (int64_t c = 0; c < dv; ++c) delta[c] = (v[c] - u[c]) * beta;
  std::fill(o, o + dv, 0.0f);
  for (int64_t i = 0; i < dk; ++i) {
    float* srow = state + i * dv;
    axpy(kn[i], delta, srow, dv);
    axpy(qn[i], srow, o, dv);
  }
}

// A head's state between its slot (f32 or bf16) and the f32 it is computed in.
void widen_bf16(const void* from, float* to, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(from);
  for (int64_t i = 0; i < n; ++i) to[i] = bf16_to_f32(h[i]);
}

void store_state(const float* from, int64_t n, bool bf16, void* to) {
  if (!bf16) {
    std::copy_n(from, n, static_cast<float*>(to));
    return;
  }
  auto* h = static_cast<uint16_t*>(to);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(from[i]);
}

}  // namespace

void gated_delta_rule(ThreadPool& pool, const Tensor& qkv, const Tensor& a, const Tensor& b,
                      const Tensor& a_log, const Tensor& dt_bias, Tensor& recurrent_state,
                      int64_t layer, const BatchPlan& plan, const DeltaNetDims& dims,
                      Tensor& out) {
  const int64_t hk = dims.k_heads, hv = dims.v_heads, dk = dims.k_dim, dv = dims.v_dim;
  const int64_t conv_dim = dims.conv_dim(), key_dim = hk * dk;

  const int64_t ratio = hv / hk, n_layers = recurrent_state.dim(1);
  const float* xs = qkv.data_as<const float>();
  const float* as = a.data_as<const float>();
  const float* bs = b.data_as<const float>();
  const float* alog = a_log.data_as<const float>();
  const float* dtb = dt_bias.data_as<const float>();
  const bool bf16 = recurrent_state.dtype() == DType::bf16;
  auto* states = static_cast<unsigned char*>(recurrent_state.data());
  const int64_t head_elements = dk * dv, head_bytes = head_elements * (bf16 ? 2 : 4);
  auto head_state = [&](int64_t slot, int64_t j) { return states + ((slot * n_layers + layer) * hv + j) * head_bytes; };
  float* os = out.data_as<float>();
  const float q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));
  const int64_t items = static_cast<int64_t>(plan.seqs().size()) * hv;

  pool.parallel_for(items, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(2 * dk + 2 * dv + (bf16 ? head_elements : 0)));
    float* qn = buf.data();
    float* kn = qn + dk;
    float* u = kn + dk;
    float* delta = u + dv;
    float* wide = delta + dv;  // the widened state of a bf16 slot
    for (int64_t item = begin; item < end; ++item) {
      const auto& seq = plan.seqs()[static_cast<size_t>(item / hv)];
      const int64_t j = item % hv, kh = j / ratio;
      void* slot_state = head_state(seq.state_slot, j);
      float* state = bf16 ? wide : static_cast<float*>(slot_state);
      if (bf16) widen_bf16(slot_state, state, head_elements);
      const double decay_scale = std::exp(static_cast<double>(alog[j]));
      const SnapshotRow* snapshots = plan.snapshot_rows().data() + seq.snapshot_begin;
      int64_t next_snapshot = 0;
      for (int64_t t = 0; t < seq.n_tokens; ++t) {
        const int64_t r = seq.first_row + t;
        const float* q = xs + r * conv_dim + kh * dk;
        const float* k = xs + r * conv_dim + key_dim + kh * dk;
        const float* v = xs + r * conv_dim + 2 * key_dim + j * dv;
        const float q_inv = 1.0f / std::sqrt(sum_squares(q, dk) + 1e-6f);
        const float k_inv = 1.0f / std::sqrt(sum_squares(k, dk) + 1e-6f);
        for (int64_t i = 0; i < dk; ++i) {
          qn[i] = (q[i] * q_inv) * q_scale;
          kn[i] = k[i] * k_inv;
        }
        const double bx = bs[r * hv + j];
        const float beta = static_cast<float>(1.0 / (1.0 + std::exp(-bx)));
        const double ax = static_cast<double>(as[r * hv + j]) + static_cast<double>(dtb[j]);
        const double softplus = ax > 20.0 ? ax : std::log1p(std::exp(ax));
        const float decay = static_cast<float>(std::exp(-decay_scale * softplus));

        delta_step(state, qn, kn, v, beta, decay, dk, dv, u, delta, os + (r * hv + j) * dv);
        int64_t copy_to = -1;
        if (t < seq.n_row_states) copy_to = plan.row_state_slots()[static_cast<size_t>(seq.row_state_begin + t)];
        if (next_snapshot < seq.n_snapshots && snapshots[next_snapshot].row == t) copy_to = snapshots[next_snapshot++].slot;
        if (copy_to >= 0) store_state(state, head_elements, bf16, head_state(copy_to, j));
      }
      if (bf16) store_state(state, head_elements, true, slot_state);
    }
  });
}

}  // namespace ds::kernels::cpu
