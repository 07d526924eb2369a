// The vision encoder's small kernels (backend_ops.h, "vision_ops.cu"): LayerNorm with bias
// (one block per row, two passes over the row in f32), the bias add, GELU (erf or tanh) of x
// plus a bias, the
// resampled position table and the rotary tables of the plan. Bandwidth-bound passes between
// the encoder's GEMMs.
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

constexpr int kThreads = 256;

template <bool kOutBf16>
__global__ void __launch_bounds__(kThreads) layer_norm_kernel(const float* x, const float* w, const float* b, int d,
                                                              float eps, void* out) {
  __shared__ float red[32];
  wait_for_previous_kernel();
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * d;
  float s = 0.0f;
  for (int i = threadIdx.x; i < d; i += kThreads) s += xr[i];
  const float mean = block_sum(s, red) / static_cast<float>(d);
  float v = 0.0f;
  for (int i = threadIdx.x; i < d; i += kThreads) {
    const float c = xr[i] - mean;
    v += c * c;
  }
  const float inv = rsqrtf(block_sum(v, red) / static_cast<float>(d) + eps);
  const int64_t base = static_cast<int64_t>(blockIdx.x) * d;
  for (int i = threadIdx.x; i < d; i += kThreads) store_act<kOutBf16>(out, base + i, (xr[i] - mean) * inv * w[i] + b[i]);
}

__global__ void add_bias_kernel(float* x, const float* b, int64_t n, int d) {
  wait_for_previous_kernel();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += b[i % d];
}

template <bool kTanh, bool kOutBf16>
__global__ void gelu_kernel(const float* x, const float* bias, int64_t n, int d, void* out) {
  wait_for_previous_kernel();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i] + bias[i % d];
  float y;
  if constexpr (kTanh)
    y = 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
  else
    y = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  store_act<kOutBf16>(out, i, y);
}

template <bool kTableBf16>
__global__ void position_embedding_kernel(const void* table, const int32_t* idx, const float* wt, int taps, int d,
                                          float* x) {
  wait_for_previous_kernel();
  const int64_t r = blockIdx.x;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < taps; ++k)
      acc += load_act<kTableBf16>(table, static_cast<int64_t>(idx[r * taps + k]) * d + i) * wt[r * taps + k];
    x[r * d + i] += acc;
  }
}

__global__ void rotary_table_kernel(float* x, const float* cs, const float* sn, int64_t rows, int heads, int half) {
  wait_for_previous_kernel();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= rows * heads * half) return;
  const int i = static_cast<int>(t % half);
  const int64_t rh = t / half, r = rh / heads;
  float* v = x + rh * 2 * half;
  const float c = cs[r * half + i], s = sn[r * half + i];
  const float x1 = v[i], x2 = v[i + half];
  v[i] = x1 * c - x2 * s;
  v[i + half] = x2 * c + x1 * s;
}

}  // namespace

void layer_norm(const float* x, const float* w, const float* b, int64_t rows, int64_t d, float eps, void* out,
                DType out_type, Stream stream) {
  if (rows <= 0) return;
  const auto k = out_type == DType::bf16 ? layer_norm_kernel<true> : layer_norm_kernel<false>;
  launch_dependent("layer_norm", k, dim3(grid_for(rows, 1)), dim3(kThreads), 0, stream, x, w, b, static_cast<int>(d), eps,
                   out);
}

void add_bias(float* x, const float* b, int64_t rows, int64_t d, Stream stream) {
  const int64_t n = rows * d;
  if (n <= 0) return;
  launch_dependent("add_bias", add_bias_kernel, dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream, x, b, n,
                   static_cast<int>(d));
}

void gelu(const float* x, const float* bias, int64_t rows, int64_t d, bool tanh_approx, void* out, DType out_type,
          Stream stream) {
  const int64_t n = rows * d;
  if (n <= 0) return;
  const bool bf = out_type == DType::bf16;
  const auto k = tanh_approx ? (bf ? gelu_kernel<true, true> : gelu_kernel<true, false>)
                             : (bf ? gelu_kernel<false, true> : gelu_kernel<false, false>);
  launch_dependent("gelu", k, dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream, x, bias, n,
                   static_cast<int>(d), out);
}

void add_position_embedding(const void* table, DType table_type, const int32_t* idx, const float* weights, int64_t rows,
                            int64_t taps, int64_t d, float* x, Stream stream) {
  if (rows <= 0) return;
  const auto k = table_type == DType::bf16 ? position_embedding_kernel<true> : position_embedding_kernel<false>;
  launch_dependent("add_position_embedding", k, dim3(grid_for(rows, 1)), dim3(kThreads), 0, stream, table, idx, weights,
                   static_cast<int>(taps), static_cast<int>(d), x);
}

void rotary_embedding(float* x, const float* cos, const float* sin, int64_t rows, int64_t heads, int64_t half,
                      Stream stream) {
  const int64_t n = rows * heads * half;
  if (n <= 0) return;
  launch_dependent("rotary_embedding", rotary_table_kernel, dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream, x,
                   cos, sin, rows, static_cast<int>(heads), static_cast<int>(half));
}

}  // namespace ds::cuda::ops
