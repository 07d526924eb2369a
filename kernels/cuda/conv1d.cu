// DeltaNet depthwise causal conv1d + SiLU of the CUDA backend, for decode tokens and prefill
// chunks alike: one thread per (sequence, channel) walks the sequence's new rows in order
// with the last Kc-1 inputs in registers (starting from the conv state, oldest first), so a
// chunk and the same tokens fed one at a time do the same arithmetic; at the end the thread
// stores its last Kc-1 inputs back. Loads of one row are coalesced across the channels.
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

template <int KC>
__global__ void conv1d_kernel(const float* x, const float* w, float* conv_state, int64_t n_layers, int64_t layer,
                              const DevSeq* seqs, int64_t channels, float* out) {
  constexpr int kTaps = KC - 1;
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  const DevSeq sq = seqs[blockIdx.y];
  float* st = conv_state + ((static_cast<int64_t>(sq.state_slot) * n_layers + layer) * channels + c) * kTaps;
  float win[KC];
  float wt[KC];
#pragma unroll
  for (int j = 0; j < kTaps; ++j) win[j] = st[j];
#pragma unroll
  for (int j = 0; j < KC; ++j) wt[j] = w[c * KC + j];
  for (int32_t t = 0; t < sq.n_tokens; ++t) {
    const int64_t r = static_cast<int64_t>(sq.first_row) + t;
    win[kTaps] = x[r * channels + c];
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < KC; ++j) acc += wt[j] * win[j];
    out[r * channels + c] = silu_f(acc);
#pragma unroll
    for (int j = 0; j < kTaps; ++j) win[j] = win[j + 1];
  }
#pragma unroll
  for (int j = 0; j < kTaps; ++j) st[j] = win[j];
}

}  // namespace

void causal_conv1d(const float* x, const float* w, float* conv_state, int64_t n_layers, int64_t layer,
                   const DevSeq* seqs, int32_t n_seqs, int64_t channels, int32_t kc, float* out, void* stream) {
  if (n_seqs == 0 || channels == 0) return;
  if (n_seqs > 65535) throw std::invalid_argument("cuda backend: causal_conv1d: more than 65535 sequences");
  const int threads = 128;
  const dim3 grid(grid_for(channels, threads), static_cast<unsigned>(n_seqs));
  auto s = as_stream(stream);
  switch (kc) {
    case 2: conv1d_kernel<2><<<grid, threads, 0, s>>>(x, w, conv_state, n_layers, layer, seqs, channels, out); break;
    case 3: conv1d_kernel<3><<<grid, threads, 0, s>>>(x, w, conv_state, n_layers, layer, seqs, channels, out); break;
    case 4: conv1d_kernel<4><<<grid, threads, 0, s>>>(x, w, conv_state, n_layers, layer, seqs, channels, out); break;
    case 5: conv1d_kernel<5><<<grid, threads, 0, s>>>(x, w, conv_state, n_layers, layer, seqs, channels, out); break;
    default: throw std::invalid_argument("cuda backend: causal_conv1d: kernel size must be 2..5");
  }
  check_launch("causal_conv1d kernel");
}

}  // namespace ds::cuda::ops
