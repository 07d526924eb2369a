// The gated attention's q/k preparation in one launch (CudaBackend::prepare_qk): split the
// q_proj output into query and gate, RMSNorm the query with q_norm and k with k_norm, and
// rotate both (partial rotate-half RoPE). Five passes over a few kilobytes per token were five
// launches of latency-bound kernels in every decode step; now each (row, head) is one block of
// d threads, one element each: the sum of squares is a block reduction, the normalised head
// sits in shared memory for the rotation's partner element. The arithmetic repeats norms.cu
// and rope.cu expression for expression (same rounded angle, cos and sin in double), so the
// result matches the separate kernels up to the order of the sum of squares. cos and sin carry
// the attention scaling (YaRN's), as in rope.cu.
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

constexpr int kMaxHeadDim = 1024;

__global__ void qk_norm_rope_kernel(const float* __restrict__ qg, float* __restrict__ q, float* __restrict__ gate,
                                    float* __restrict__ k, const float* __restrict__ q_norm,
                                    const float* __restrict__ k_norm, RopePositions positions,
                                    int64_t nq, int64_t nkv, int d, float eps, int half,
                                    const float* __restrict__ inv_freq, float scale) {
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
    const int f = i < half ? i : i - half;
    const float angle = rope_position(positions, row, f) * inv_freq[f];
    c = static_cast<float>(cos(static_cast<double>(angle))) * scale;
    s = static_cast<float>(sin(static_cast<double>(angle))) * scale;
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

// Prefill shapes (d = 128 kChunks up to 512, the rotated dims within the first 128 and
// rotary / 8 a power of two: the 9B's and 27B's 256 / 64): one block per row, one warp per
// head (heads / warps each), 16-byte accesses. The row's cos / sin are computed once into
// shared memory (the per-head kernel above recomputes them for every head), and a rotated
// element's partner (i +- half) sits half / 4 lanes away in the same chunk: one shuffle.
constexpr int kVecMaxChunks = 4;
constexpr int kVecMaxHalf = 64;

template <int kChunks>
__global__ void qk_norm_rope_vec_kernel(const float* __restrict__ qg, float* __restrict__ q, float* __restrict__ gate,
                                        float* __restrict__ k, const float* __restrict__ q_norm,
                                        const float* __restrict__ k_norm, RopePositions positions,
                                        int nq, int nkv, int d, float eps, int half,
                                        const float* __restrict__ inv_freq, float scale) {
  __shared__ float cs[2][kVecMaxHalf];
  const int64_t row = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int i = static_cast<int>(threadIdx.x); i < half; i += static_cast<int>(blockDim.x)) {
    const float angle = rope_position(positions, row, i) * inv_freq[i];
    cs[0][i] = static_cast<float>(cos(static_cast<double>(angle))) * scale;
    cs[1][i] = static_cast<float>(sin(static_cast<double>(angle))) * scale;
  }
  float4 wq[kChunks], wk[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    wq[c] = reinterpret_cast<const float4*>(q_norm)[c * 32 + lane];
    wk[c] = reinterpret_cast<const float4*>(k_norm)[c * 32 + lane];
  }
  __syncthreads();
  // This lane's four elements of chunk 0 and, where they rotate, their cos / sin.
  const int e0 = 4 * lane;
  const bool rotates = e0 < 2 * half;
  float cr[4], sr[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = e0 + j, a = i < half ? i : i - half;
    cr[j] = rotates ? cs[0][a] : 1.0f;
    sr[j] = rotates ? cs[1][a] : 0.0f;
  }
  const int partner = half / 4;
  wait_for_previous_kernel();
  for (int h = warp; h < nq + nkv; h += warps) {
    const bool is_q = h < nq;
    float4 x[kChunks];
    float4* dst;
    if (is_q) {
      const float4* src = reinterpret_cast<const float4*>(qg + (row * nq + h) * 2 * d);
      float4* g = reinterpret_cast<float4*>(gate + (row * nq + h) * d);
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        x[c] = src[c * 32 + lane];
        g[c * 32 + lane] = src[d / 4 + c * 32 + lane];
      }
      dst = reinterpret_cast<float4*>(q + (row * nq + h) * d);
    } else {
      dst = reinterpret_cast<float4*>(k + (row * nkv + (h - nq)) * d);
#pragma unroll
      for (int c = 0; c < kChunks; ++c) x[c] = dst[c * 32 + lane];
    }
    float ss = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
      ss += x[c].x * x[c].x + x[c].y * x[c].y + x[c].z * x[c].z + x[c].w * x[c].w;
    ss = warp_sum(ss);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const float4 w = is_q ? wq[c] : wk[c];
      x[c] = make_float4((x[c].x * inv) * (1.0f + w.x), (x[c].y * inv) * (1.0f + w.y), (x[c].z * inv) * (1.0f + w.z),
                         (x[c].w * inv) * (1.0f + w.w));
    }
    // The rotation (chunk 0 only): every lane shuffles, the rotating ones use the result.
    const float v[4] = {x[0].x, x[0].y, x[0].z, x[0].w};
    float o[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float p = __shfl_xor_sync(0xffffffffu, v[j], partner);
      o[j] = e0 + j < half ? v[j] * cr[j] - p * sr[j] : v[j] * cr[j] + p * sr[j];
    }
    if (rotates) x[0] = make_float4(o[0], o[1], o[2], o[3]);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) dst[c * 32 + lane] = x[c];
  }
}

bool vec_shape(int64_t d, int64_t half) {
  return d % 128 == 0 && d <= 128 * kVecMaxChunks && half >= 4 && half <= kVecMaxHalf && (half & (half - 1)) == 0;
}

// Warps per block: the largest count up to 16 that divides the heads (each warp the same work).
unsigned warps_for(int64_t heads) {
  int64_t w = heads < 16 ? heads : 16;
  while (heads % w != 0) --w;
  return static_cast<unsigned>(w);
}

}  // namespace

bool qk_norm_rope_supported(int64_t d) { return d > 0 && d % 32 == 0 && d <= kMaxHeadDim; }

void qk_norm_rope(const float* qg, float* q, float* gate, float* k, const float* q_norm, const float* k_norm,
                  const RopePositions& positions, int64_t rows, int64_t nq, int64_t nkv, int64_t d, float eps,
                  int64_t rotary, const float* inv_freq, float scale, Stream stream) {
  if (!qk_norm_rope_supported(d)) throw std::invalid_argument("cuda backend: qk_norm_rope: unsupported head dim");
  if (rotary < 0 || rotary > d || rotary % 2 != 0) throw std::invalid_argument("cuda backend: qk_norm_rope: bad rotary dim");
  const int64_t blocks = rows * (nq + nkv);
  if (blocks == 0) return;
  const auto al = [](const void* p) { return aligned_to(p, 16); };
  if (vec_shape(d, rotary / 2) && al(qg) && al(q) && al(gate) && al(k) && al(q_norm) && al(k_norm) &&
      rows <= 0x7fffffffLL && nq + nkv <= 0x7fffffffLL) {
    const auto kernel = d == 128 ? qk_norm_rope_vec_kernel<1> : d == 256 ? qk_norm_rope_vec_kernel<2>
                        : d == 384 ? qk_norm_rope_vec_kernel<3> : qk_norm_rope_vec_kernel<4>;
    launch_dependent("qk_norm_rope_vec_kernel", kernel, dim3(static_cast<unsigned>(rows)),
                     dim3(32 * warps_for(nq + nkv)), 0, stream, qg, q, gate, k, q_norm, k_norm, positions,
                     static_cast<int>(nq), static_cast<int>(nkv), static_cast<int>(d), eps, static_cast<int>(rotary / 2),
                     inv_freq, scale);
    return;
  }
  launch_dependent("qk_norm_rope kernel", qk_norm_rope_kernel, dim3(grid_for(blocks, 1)), dim3(static_cast<unsigned>(d)),
                   0, stream, qg, q, gate, k, q_norm, k_norm, positions, nq, nkv, static_cast<int>(d), eps,
                   static_cast<int>(rotary / 2), inv_freq, scale);
}

}  // namespace ds::cuda::ops
