// RMSNorm kernels of the CUDA backend: the zero-centred RMSNorm (layer norms, final norm,
// q_norm / k_norm) and the DeltaNet gated RMSNorm with SiLU(z). Hidden-size rows: one thread
// block per row; head-size rows (<= 512): one warp per row with the row in registers. The
// sum of squares is f32, then the scaled write (same thread, same element, so out may alias
// x). Writing bf16 here is what feeds the GEMMs without a conversion pass.
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

// Hidden-size rows up to kRowRegs x 512 elements (one block per row): the row and the weight
// in registers, so the weight loads are issued before waiting for the previous kernel and the
// row is read once -- a batch-1 decode step runs ~65 of these one-block kernels back to back
// with its GEMVs, and each is a chain of memory round trips.
constexpr int kRowThreads = 512;
constexpr int kRowRegs = 16;

template <bool kInBf16, bool kOutBf16>
__global__ void __launch_bounds__(kRowThreads) rms_norm_row_kernel(const void* x, const float* w, int d, float eps,
                                                                   void* out) {
  __shared__ float red[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * d;
  float wr[kRowRegs], v[kRowRegs];
#pragma unroll
  for (int k = 0; k < kRowRegs; ++k) {
    const int i = k * kRowThreads + static_cast<int>(threadIdx.x);
    wr[k] = i < d ? w[i] : 0.0f;
  }
  wait_for_previous_kernel();
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kRowRegs; ++k) {
    const int i = k * kRowThreads + static_cast<int>(threadIdx.x);
    v[k] = i < d ? load_act<kInBf16>(x, base + i) : 0.0f;
    ss += v[k] * v[k];
  }
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
#pragma unroll
  for (int k = 0; k < kRowRegs; ++k) {
    const int i = k * kRowThreads + static_cast<int>(threadIdx.x);
    if (i < d) store_act<kOutBf16>(out, base + i, (v[k] * inv) * (1.0f + wr[k]));
  }
}

// Longer rows: two passes over the row.
template <bool kInBf16, bool kOutBf16>
__global__ void rms_norm_kernel(const void* x, const float* w, int64_t d, float eps, void* out) {
  wait_for_previous_kernel();
  __shared__ float red[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float v = load_act<kInBf16>(x, base + i);
    ss += v * v;
  }
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float v = load_act<kInBf16>(x, base + i);
    store_act<kOutBf16>(out, base + i, (v * inv) * (1.0f + w[i]));
  }
}

template <bool kOutBf16>
__global__ void gated_rms_norm_kernel(const float* x, const float* z, const float* w, int64_t d, float eps, void* out) {
  wait_for_previous_kernel();
  __shared__ float red[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += x[base + i] * x[base + i];
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    store_act<kOutBf16>(out, base + i, (w[i] * (x[base + i] * inv)) * silu_f(z[base + i]));
}

// Short rows (q/k heads, DeltaNet heads: d <= 512): one warp per row, eight rows per block,
// the row in registers, a shuffle reduction instead of block barriers.
constexpr int kWarpRowMax = 512;

template <bool kInBf16, bool kOutBf16>
__global__ void rms_norm_warp_kernel(const void* x, const float* w, int64_t rows, int d, float eps, void* out) {
  wait_for_previous_kernel();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const int64_t base = row * d;
  float v[kWarpRowMax / 32];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kWarpRowMax / 32; ++k) {
    const int i = k * 32 + lane;
    v[k] = i < d ? load_act<kInBf16>(x, base + i) : 0.0f;
    ss += v[k] * v[k];
  }
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
#pragma unroll
  for (int k = 0; k < kWarpRowMax / 32; ++k) {
    const int i = k * 32 + lane;
    if (i < d) store_act<kOutBf16>(out, base + i, (v[k] * inv) * (1.0f + w[i]));
  }
}

template <bool kOutBf16>
__global__ void gated_rms_norm_warp_kernel(const float* x, const float* z, const float* w, int64_t rows, int d,
                                           float eps, void* out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const int64_t base = row * d;
  float wr[kWarpRowMax / 32];  // the weight, loaded before the wait
#pragma unroll
  for (int k = 0; k < kWarpRowMax / 32; ++k) {
    const int i = k * 32 + lane;
    wr[k] = i < d ? w[i] : 0.0f;
  }
  wait_for_previous_kernel();
  // z is loaded with x, before the reduction: read between the stores (which may alias it, as
  // far as the compiler knows) each load would wait for the one before.
  float v[kWarpRowMax / 32], zr[kWarpRowMax / 32];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kWarpRowMax / 32; ++k) {
    const int i = k * 32 + lane;
    v[k] = i < d ? x[base + i] : 0.0f;
    zr[k] = i < d ? z[base + i] : 0.0f;
    ss += v[k] * v[k];
  }
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
#pragma unroll
  for (int k = 0; k < kWarpRowMax / 32; ++k) {
    const int i = k * 32 + lane;
    if (i < d) store_act<kOutBf16>(out, base + i, (wr[k] * (v[k] * inv)) * silu_f(zr[k]));
  }
}

int threads_for(int64_t d) {
  if (d >= 1024) return 512;
  if (d >= 256) return 256;
  return 128;
}

void check_rows(int64_t rows) {
  if (rows > 0x7fffffffLL) throw std::invalid_argument("cuda backend: too many rows for one norm launch");
}

}  // namespace

void rms_norm(const void* x, DType x_type, const float* w, int64_t rows, int64_t d, float eps, void* out,
              DType out_type, Stream stream) {
  if (rows == 0) return;
  check_rows(rows);
  const Stream s = stream;
  const bool ib = x_type == DType::bf16, ob = out_type == DType::bf16;
  if (d <= kWarpRowMax) {
    const dim3 g(grid_for(rows, 8));
    const int di = static_cast<int>(d);
    if (ib && ob)
      launch_dependent("rms_norm_warp_kernel", rms_norm_warp_kernel<true, true>, g, 256, 0, s, x, w, rows, di, eps, out);
    else if (ib)
      launch_dependent("rms_norm_warp_kernel", rms_norm_warp_kernel<true, false>, g, 256, 0, s, x, w, rows, di, eps, out);
    else if (ob)
      launch_dependent("rms_norm_warp_kernel", rms_norm_warp_kernel<false, true>, g, 256, 0, s, x, w, rows, di, eps, out);
    else
      launch_dependent("rms_norm_warp_kernel", rms_norm_warp_kernel<false, false>, g, 256, 0, s, x, w, rows, di, eps, out);
    return;
  }
  const dim3 grid(static_cast<unsigned>(rows));
  if (d <= int64_t{kRowThreads} * kRowRegs) {
    const int di = static_cast<int>(d);
    if (ib && ob)
      launch_dependent("rms_norm_row_kernel", rms_norm_row_kernel<true, true>, grid, kRowThreads, 0, s, x, w, di, eps, out);
    else if (ib)
      launch_dependent("rms_norm_row_kernel", rms_norm_row_kernel<true, false>, grid, kRowThreads, 0, s, x, w, di, eps, out);
    else if (ob)
      launch_dependent("rms_norm_row_kernel", rms_norm_row_kernel<false, true>, grid, kRowThreads, 0, s, x, w, di, eps, out);
    else
      launch_dependent("rms_norm_row_kernel", rms_norm_row_kernel<false, false>, grid, kRowThreads, 0, s, x, w, di, eps, out);
    return;
  }
  const int t = threads_for(d);
  if (ib && ob)
    launch_dependent("rms_norm_kernel", rms_norm_kernel<true, true>, grid, t, 0, s, x, w, d, eps, out);
  else if (ib)
    launch_dependent("rms_norm_kernel", rms_norm_kernel<true, false>, grid, t, 0, s, x, w, d, eps, out);
  else if (ob)
    launch_dependent("rms_norm_kernel", rms_norm_kernel<false, true>, grid, t, 0, s, x, w, d, eps, out);
  else
    launch_dependent("rms_norm_kernel", rms_norm_kernel<false, false>, grid, t, 0, s, x, w, d, eps, out);
}

void gated_rms_norm(const float* x, const float* z, const float* w, int64_t rows, int64_t d, float eps, void* out,
                    DType out_type, Stream stream) {
  if (rows == 0) return;
  check_rows(rows);
  if (d <= kWarpRowMax) {
    const dim3 g(grid_for(rows, 8));
    const int di = static_cast<int>(d);
    if (out_type == DType::bf16)
      launch_dependent("gated_rms_norm_warp_kernel", gated_rms_norm_warp_kernel<true>, g, 256, 0, stream, x, z, w, rows, di, eps, out);
    else
      launch_dependent("gated_rms_norm_warp_kernel", gated_rms_norm_warp_kernel<false>, g, 256, 0, stream, x, z, w, rows, di, eps, out);
    return;
  }
  const dim3 grid(static_cast<unsigned>(rows));
  const int t = threads_for(d);
  if (out_type == DType::bf16)
    launch_dependent("gated_rms_norm_kernel", gated_rms_norm_kernel<true>, grid, t, 0, stream, x, z, w, d, eps, out);
  else
    launch_dependent("gated_rms_norm_kernel", gated_rms_norm_kernel<false>, grid, t, 0, stream, x, z, w, d, eps, out);
}

}  // namespace ds::cuda::ops
