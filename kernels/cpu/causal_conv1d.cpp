// Depthwise causal conv1d + SiLU of a DeltaNet layer, continuing each sequence from its conv
// state. For a channel, output t = silu(sum_j w[j] * u[t - (Kc-1) + j]) where u is the state's
// Kc-1 earlier inputs (oldest first; zeros at sequence start) followed by the new rows; the
// state then keeps the last Kc-1 inputs. A chunk and the same tokens fed one at a time run
// the identical arithmetic, so they leave bit-identical state. Row-state slots and snapshot
// slots (batch_plan.h) get the window after their row: the state per-token decode
// would have left there.
//
// Work item = (sequence, block of 64 channels): the block's window is laid out token-major
// so the inner loop runs over contiguous channels.
#include <algorithm>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/vec.h"

namespace ds::kernels::cpu {

void causal_conv1d(ThreadPool& pool, const Tensor& x, const Tensor& weight, Tensor& conv_state,
                   int64_t layer, const BatchPlan& plan, Tensor& out) {
  const int64_t ch = x.dim(1);
  const int64_t kc = weight.dim(2), taps = kc - 1;

  constexpr int64_t kBlock = 64;
  const int64_t n_blocks = (ch + kBlock - 1) / kBlock;
  const int64_t n_layers = conv_state.dim(1);
  const float* xs = x.data_as<const float>();
  const float* ws = weight.data_as<const float>();
  float* states = conv_state.data_as<float>();
  float* os = out.data_as<float>();
  const int64_t items = static_cast<int64_t>(plan.seqs().size()) * n_blocks;

  pool.parallel_for(items, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> ext, wt;
    float acc[kBlock];
    for (int64_t item = begin; item < end; ++item) {
      const auto& seq = plan.seqs()[static_cast<size_t>(item / n_blocks)];
      const int64_t c0 = (item % n_blocks) * kBlock, nc = std::min(kBlock, ch - c0);
      const int64_t n = seq.n_tokens;
      float* st = states + ((seq.state_slot * n_layers + layer) * ch + c0) * taps;
      ext.assign(static_cast<size_t>((taps + n) * kBlock), 0.0f);
      wt.assign(static_cast<size_t>(kc * kBlock), 0.0f);
      for (int64_t c = 0; c < nc; ++c) {
        for (int64_t j = 0; j < taps; ++j) ext[static_cast<size_t>(j * kBlock + c)] = st[c * taps + j];
        for (int64_t j = 0; j < kc; ++j) wt[static_cast<size_t>(j * kBlock + c)] = ws[(c0 + c) * kc + j];
      }
      for (int64_t t = 0; t < n; ++t) {
        const float* xr = xs + (seq.first_row + t) * ch + c0;
        std::copy(xr, xr + nc, ext.begin() + (taps + t) * kBlock);
      }
      for (int64_t t = 0; t < n; ++t) {
        std::fill(acc, acc + kBlock, 0.0f);
        for (int64_t j = 0; j < kc; ++j) {
          const float* e = ext.data() + (t + j) * kBlock;
          const float* w = wt.data() + j * kBlock;
          for (int64_t c = 0; c < kBlock; ++c) acc[c] += w[c] * e[c];
        }
        float* orow = os + (seq.first_row + t) * ch + c0;
        for (int64_t c = 0; c < nc; ++c) orow[c] = silu(acc[c]);
      }
      // After row t the last taps inputs are ext rows t + 1 .. t + taps.
      auto store = [&](float* dst, int64_t after) {
        for (int64_t c = 0; c < nc; ++c)
          for (int64_t j = 0; j < taps; ++j) dst[c * taps + j] = ext[static_cast<size_t>((after + 1 + j) * kBlock + c)];
      };
      for (int64_t t = 0; t < seq.n_row_states; ++t) {
        const int64_t slot = plan.row_state_slots()[static_cast<size_t>(seq.row_state_begin + t)];
        store(states + ((slot * n_layers + layer) * ch + c0) * taps, t);
      }
      for (int64_t k = 0; k < seq.n_snapshots; ++k) {
        const SnapshotRow& sr = plan.snapshot_rows()[static_cast<size_t>(seq.snapshot_begin + k)];
        store(states + ((sr.slot * n_layers + layer) * ch + c0) * taps, sr.row);
      }
      store(st, n - 1);
    }
  });
}

}  // namespace ds::kernels::cpu
