// The gated attention's q/k preparation in one launch (CudaBackend::prepare_qk): split the
// q_proj output into query and gate, RMSNorm the query with q_norm and k with k_norm, and
// rotate both (partial rotate-half RoPE). Five passes over a few kilobytes per token were five
// launches of latency-bound kernels in every decode step; now each (row, head) is one block of
// d threads, one element each: the sum of squares is a block reduction, the normalised head
// sits in shared memory for the rotation's partner element. The arithmetic repeats norms.cu
// and rope.cu expression for expression (same rounded angle, cos and sin in double), so the
// result matches the separate kernels up to the order of the sum of squares.
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

constexpr int kMaxHeadDim = 1024;

__global__ void qk_norm_rope_kernel(const float* __restrict__ qg, float* __restrict__ q, float* __restrict__ gate,
                                    float* __restrict__ k, const float* __restrict__ q_norm,
                                    const float* __restrict__ k_norm, const int32_t* __restrict__ positions,
                                    int64_t nq, int64_t nkv, int d, float eps, int half,
                                    const float* __restrict__ inv_freq) {
  __shared__ float red[32];
  __shared__ float y[kMaxHeadDim];
  const int64_t heads = nq + nkv;
  const int64_t row = blockIdx.x / heads, h = blockIdx.x % heads;
  const int i = threadIdx.x;
  const bool is_q = h < nq;
  // The norm weights, the row's position (uploaded with the step's plan) and the rotation are
  // known before the previous kernel's results are: they are fetched and computed first.
  const float wi = (is_q ? q_norm : k_norm)[i];
  const bool rotates = i < 2 * half;
  float c = 1.0f, s = 0.0f;
  if (rotates) {
    const float angle = static_cast<float>(positions[row]) * inv_freq[i < half ? i : i - half];
    c = static_cast<float>(cos(static_cast<double>(angle)));
    s = static_cast<float>(sin(static_cast<double>(angle)));
  }
  wait_for_previous_kernel();
  float x;
  float* dst;
  if (is_q) {
    const float* src = qg + (row * nq + h) * 2 * d;
    x = src[i];
    gate[(row * nq + h) * d + i] = src[d + i];
    dst = q + (row * nq + h) * d;
  } else {
    dst = k + (row * nkv + (h - nq)) * d;
    x = dst[i];
  }
  const float ss = block_sum(x * x, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  const float v = (x * inv) * (1.0f + wi);
  y[i] = v;
  __syncthreads();
  float o = v;
  if (rotates) o = i < half ? v * c - y[i + half] * s : v * c + y[i - half] * s;
  dst[i] = o;
}

}  // namespace

bool qk_norm_rope_supported(int64_t d) { return d > 0 && d % 32 == 0 && d <= kMaxHeadDim; }

void qk_norm_rope(const float* qg, float* q, float* gate, float* k, const float* q_norm, const float* k_norm,
                  const int32_t* positions, int64_t rows, int64_t nq, int64_t nkv, int64_t d, float eps,
                  int64_t rotary, const float* inv_freq, Stream stream) {
  if (!qk_norm_rope_supported(d)) throw std::invalid_argument("cuda backend: qk_norm_rope: unsupported head dim");
  if (rotary < 0 || rotary > d || rotary % 2 != 0) throw std::invalid_argument("cuda backend: qk_norm_rope: bad rotary dim");
  const int64_t blocks = rows * (nq + nkv);
  if (blocks == 0) return;
  launch_dependent("qk_norm_rope kernel", qk_norm_rope_kernel, dim3(grid_for(blocks, 1)), dim3(static_cast<unsigned>(d)),
                   0, stream, qg, q, gate, k, q_norm, k_norm, positions, nq, nkv, static_cast<int>(d), eps,
                   static_cast<int>(rotary / 2), inv_freq);
}

}  // namespace ds::cuda::ops
