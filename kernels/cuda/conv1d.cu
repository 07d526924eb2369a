// DeltaNet depthwise causal conv1d + SiLU of the CUDA backend. Every output is the same sum
// of Kc products over a window of inputs (oldest first), whether the window comes from the
// conv state or from earlier rows, so a chunk and the same tokens fed one at a time do the
// same arithmetic. Decode rows and short chunks: one thread per (sequence, channel) walks the
// rows with the window in registers and stores the last Kc-1 inputs back (and, for a verify
// chunk, the window after each of its first rows into its row-state slots; the window after
// each snapshot row into its slot). Prefill chunks: one thread per (64-row chunk item,
// channel), all items in parallel, then a second kernel writes each such sequence's state
// (its last Kc-1 rows); an item that starts at a snapshot's position writes the window it
// starts from (the state after the row before it) into the snapshot slot. Loads of a row are
// coalesced across the channels.
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

template <int KC>
__global__ void conv1d_kernel(const float* x, const float* w, float* conv_state, int64_t n_layers, int64_t layer,
                              const DevSeq* seqs, const int32_t* seq_ids, const int32_t* row_state_slots,
                              const DevSnapshot* snapshots, int64_t channels, float* out) {
  constexpr int kTaps = KC - 1;
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) {
    wait_for_previous_kernel();
    return;
  }
  // The plan (uploaded at the start of the step), this layer's conv state (last written by
  // this kernel a step ago) and the filter were all written before the kernel ahead of this
  // one started (see launch_dependent), so they load before the wait; x is its result.
  const DevSeq sq = seqs[seq_ids ? seq_ids[blockIdx.y] : blockIdx.y];
  float* st = conv_state + ((static_cast<int64_t>(sq.state_slot) * n_layers + layer) * channels + c) * kTaps;
  float win[KC];
  float wt[KC];
#pragma unroll
  for (int j = 0; j < kTaps; ++j) win[j] = st[j];
#pragma unroll
  for (int j = 0; j < KC; ++j) wt[j] = w[c * KC + j];
  wait_for_previous_kernel();
  int32_t next_snapshot = 0;
  for (int32_t t = 0; t < sq.n_tokens; ++t) {
    const int64_t r = static_cast<int64_t>(sq.first_row) + t;
    win[kTaps] = x[r * channels + c];
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < KC; ++j) acc += wt[j] * win[j];
    out[r * channels + c] = silu_f(acc);
#pragma unroll
    for (int j = 0; j < kTaps; ++j) win[j] = win[j + 1];
    int64_t slot = t < sq.n_row_states ? row_state_slots[sq.row_state_begin + t] : -1;
    if (next_snapshot < sq.n_snapshots && snapshots[sq.snapshot_begin + next_snapshot].row == t)
      slot = snapshots[sq.snapshot_begin + next_snapshot++].slot;
    if (slot >= 0) {
      float* rs = conv_state + ((slot * n_layers + layer) * channels + c) * kTaps;
#pragma unroll
      for (int j = 0; j < kTaps; ++j) rs[j] = win[j];
    }
  }
#pragma unroll
  for (int j = 0; j < kTaps; ++j) st[j] = win[j];
}

// Prefill chunks: one thread per (chunk item, channel) over the item's <= 64 rows, its first
// Kc-1 inputs taken from the rows before it or, at the sequence start, from the conv state,
// which this kernel only reads (the state update runs after it, below); it writes only
// snapshot slots, which no sequence reads in this step.
template <int KC>
__global__ void conv1d_chunks_kernel(const float* x, const float* w, float* conv_state, int64_t n_layers,
                                     int64_t layer, const DevSeq* seqs, const DeltaNetChunkItem* items, int64_t channels,
                                     float* out) {
  wait_for_previous_kernel();
  constexpr int kTaps = KC - 1;
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  const DeltaNetChunkItem it = items[blockIdx.y];
  const DevSeq sq = seqs[it.seq];
  const int64_t t0 = it.row0 - sq.first_row;  // position of the item's first row in the chunk
  const float* st = conv_state + ((static_cast<int64_t>(sq.state_slot) * n_layers + layer) * channels + c) * kTaps;
  float win[KC];
  float wt[KC];
#pragma unroll
  for (int j = 0; j < kTaps; ++j) {
    const int64_t pos = t0 - kTaps + j;
    win[j] = pos >= 0 ? x[(static_cast<int64_t>(sq.first_row) + pos) * channels + c] : st[kTaps + pos];
  }
  if (it.snapshot_slot >= 0) {
    float* ss = conv_state + ((static_cast<int64_t>(it.snapshot_slot) * n_layers + layer) * channels + c) * kTaps;
#pragma unroll
    for (int j = 0; j < kTaps; ++j) ss[j] = win[j];
  }
#pragma unroll
  for (int j = 0; j < KC; ++j) wt[j] = w[c * KC + j];
  // Eight rows' inputs are loaded before their outputs are stored: loads that follow a store
  // the compiler cannot prove apart from them would each wait for the one before. (Each row
  // is read before it is written, so this holds even for out == x.)
  constexpr int kBatch = 8;
  for (int32_t t0b = 0; t0b < it.len; t0b += kBatch) {
    float xs[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
      xs[u] = t0b + u < it.len ? x[(static_cast<int64_t>(it.row0) + t0b + u) * channels + c] : 0.0f;
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (t0b + u >= it.len) break;
      win[kTaps] = xs[u];
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < KC; ++j) acc += wt[j] * win[j];
      out[(static_cast<int64_t>(it.row0) + t0b + u) * channels + c] = silu_f(acc);
#pragma unroll
      for (int j = 0; j < kTaps; ++j) win[j] = win[j + 1];
    }
  }
}

// The state of a chunked sequence (more than Kc-1 new rows): its last Kc-1 inputs.
template <int KC>
__global__ void conv1d_state_kernel(const float* x, float* conv_state, int64_t n_layers, int64_t layer,
                                    const DevSeq* seqs, const DeltaNetChunkSeq* chunk_seqs, int64_t channels) {
  wait_for_previous_kernel();
  constexpr int kTaps = KC - 1;
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  const DevSeq sq = seqs[chunk_seqs[blockIdx.y].seq];
  float* st = conv_state + ((static_cast<int64_t>(sq.state_slot) * n_layers + layer) * channels + c) * kTaps;
#pragma unroll
  for (int j = 0; j < kTaps; ++j)
    st[j] = x[(static_cast<int64_t>(sq.first_row) + sq.n_tokens - kTaps + j) * channels + c];
}

}  // namespace

void causal_conv1d_chunks(const float* x, const float* w, float* conv_state, int64_t n_layers, int64_t layer,
                          const DevSeq* seqs, const DeltaNetChunkItem* items, int32_t n_items, const DeltaNetChunkSeq* chunk_seqs,
                          int32_t n_chunk_seqs, int64_t channels, int32_t kc, float* out, Stream stream) {
  if (n_items == 0 || channels == 0) return;
  if (n_items > 65535 || n_chunk_seqs > 65535)
    throw std::invalid_argument("cuda backend: causal_conv1d: more than 65535 chunks in one step");
  const int threads = 128;
  const dim3 g1(grid_for(channels, threads), static_cast<unsigned>(n_items));
  const dim3 g2(grid_for(channels, threads), static_cast<unsigned>(n_chunk_seqs));
  const Stream s = stream;
  switch (kc) {
#define DS_CONV_CASE(K)                                                                                         \
  case K:                                                                                                       \
    launch_dependent("conv1d_chunks_kernel", conv1d_chunks_kernel<K>, g1, threads, 0, s, x, w, conv_state, n_layers, layer, seqs, items, channels, out); \
    launch_dependent("conv1d_state_kernel", conv1d_state_kernel<K>, g2, threads, 0, s, x, conv_state, n_layers, layer, seqs, chunk_seqs, channels);    \
    break;
    DS_CONV_CASE(2)
    DS_CONV_CASE(3)
    DS_CONV_CASE(4)
    DS_CONV_CASE(5)
#undef DS_CONV_CASE
    default: throw std::invalid_argument("cuda backend: causal_conv1d: kernel size must be 2..5");
  }
}

void causal_conv1d(const float* x, const float* w, float* conv_state, int64_t n_layers, int64_t layer,
                   const DevSeq* seqs, const int32_t* seq_ids, int32_t n_seqs, const int32_t* row_state_slots,
                   const DevSnapshot* snapshots, int64_t channels, int32_t kc, float* out, Stream stream) {
  if (n_seqs == 0 || channels == 0) return;
  if (n_seqs > 65535) throw std::invalid_argument("cuda backend: causal_conv1d: more than 65535 sequences");
  const int threads = 128;
  const dim3 grid(grid_for(channels, threads), static_cast<unsigned>(n_seqs));
  const Stream s = stream;
  switch (kc) {
    case 2: launch_dependent("conv1d_kernel", conv1d_kernel<2>, grid, threads, 0, s, x, w, conv_state, n_layers, layer, seqs, seq_ids, row_state_slots, snapshots, channels, out); break;
    case 3: launch_dependent("conv1d_kernel", conv1d_kernel<3>, grid, threads, 0, s, x, w, conv_state, n_layers, layer, seqs, seq_ids, row_state_slots, snapshots, channels, out); break;
    case 4: launch_dependent("conv1d_kernel", conv1d_kernel<4>, grid, threads, 0, s, x, w, conv_state, n_layers, layer, seqs, seq_ids, row_state_slots, snapshots, channels, out); break;
    case 5: launch_dependent("conv1d_kernel", conv1d_kernel<5>, grid, threads, 0, s, x, w, conv_state, n_layers, layer, seqs, seq_ids, row_state_slots, snapshots, channels, out); break;
    default: throw std::invalid_argument("cuda backend: causal_conv1d: kernel size must be 2..5");
  }
}

}  // namespace ds::cuda::ops
