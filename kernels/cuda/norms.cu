// RMSNorm kernels of the CUDA backend: the zero-centred RMSNorm (layer norms, final norm,
// q_norm / k_norm) and the DeltaNet gated RMSNorm with SiLU(z). Hidden-size rows: one thread
// block per row; head-size rows (<= 512): one warp per row with the row in registers. The
// sum of squares is f32, then the scaled write (same thread, same element, so out may alias
// x). Writing bf16 here is what feeds the GEMMs without a conversion pass. Rows whose width
// allows it are read and written in 16-byte chunks (the prefill shapes, where these passes are
// bandwidth-bound).
#include <type_traits>

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

// Hidden-size rows of d = 16 x blockDim.x (4096: 256 threads, 5120: 320), the prefill path:
// four 16-byte chunks per thread (the weight's too), all loads issued at once. Smaller blocks
// than rms_norm_row_kernel's and 16-byte accesses: several rows per SM in different phases
// keep the loads flowing while others reduce and store.
constexpr int kVecChunks = 4;

template <bool kBf16>
__device__ __forceinline__ float4 load4(const void* p, int64_t i4) {
  if constexpr (kBf16) {
    const uint2 b = static_cast<const uint2*>(p)[i4];
    return make_float4(detail::bf16_bits_to_f32(b.x & 0xffffu), detail::bf16_bits_to_f32(b.x >> 16),
                       detail::bf16_bits_to_f32(b.y & 0xffffu), detail::bf16_bits_to_f32(b.y >> 16));
  } else {
    return static_cast<const float4*>(p)[i4];
  }
}
template <bool kBf16>
__device__ __forceinline__ void store4(void* p, int64_t i4, float4 v) {
  if constexpr (kBf16) {
    uint2 b;
    b.x = detail::f32_to_bf16_bits(v.x) | (static_cast<uint32_t>(detail::f32_to_bf16_bits(v.y)) << 16);
    b.y = detail::f32_to_bf16_bits(v.z) | (static_cast<uint32_t>(detail::f32_to_bf16_bits(v.w)) << 16);
    static_cast<uint2*>(p)[i4] = b;
  } else {
    static_cast<float4*>(p)[i4] = v;
  }
}

template <bool kInBf16, bool kOutBf16>
__global__ void rms_norm_vec_kernel(const void* x, const float* w, int d, float eps, void* out) {
  __shared__ float red[32];
  const int64_t base4 = static_cast<int64_t>(blockIdx.x) * (d / 4);
  float4 wr[kVecChunks], v[kVecChunks];
#pragma unroll
  for (int k = 0; k < kVecChunks; ++k) wr[k] = reinterpret_cast<const float4*>(w)[k * blockDim.x + threadIdx.x];
  wait_for_previous_kernel();
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecChunks; ++k) v[k] = load4<kInBf16>(x, base4 + k * blockDim.x + threadIdx.x);
#pragma unroll
  for (int k = 0; k < kVecChunks; ++k) ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
#pragma unroll
  for (int k = 0; k < kVecChunks; ++k) {
    const float4 o = make_float4((v[k].x * inv) * (1.0f + wr[k].x), (v[k].y * inv) * (1.0f + wr[k].y),
                                 (v[k].z * inv) * (1.0f + wr[k].z), (v[k].w * inv) * (1.0f + wr[k].w));
    store4<kOutBf16>(out, base4 + k * blockDim.x + threadIdx.x, o);
  }
}

bool vec_row_ok(int64_t d, const void* x, const float* w, const void* out) {
  const auto al = [](const void* p) { return aligned_to(p, 16); };
  const int64_t t = d / (4 * kVecChunks);
  return d % (4 * kVecChunks) == 0 && t % 32 == 0 && t <= 1024 && al(x) && al(w) && al(out);
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

// Head-size rows of kChunks whole 128-element chunks (DeltaNet heads of 128: one): one warp
// per row, 16-byte loads of x and z. The chunk count is a template argument so a row of one
// chunk holds one chunk's registers, and enough warps fit on an SM to keep the loads flowing.
template <bool kOutBf16, int kChunks>
__global__ void gated_rms_norm_vec_kernel(const float* x, const float* z, const float* w, int64_t rows, int d,
                                          float eps, void* out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  float4 wr[kChunks];
#pragma unroll
  for (int k = 0; k < kChunks; ++k) wr[k] = reinterpret_cast<const float4*>(w)[k * 32 + lane];
  wait_for_previous_kernel();
  if (row >= rows) return;
  const int64_t base4 = row * (d / 4);
  float4 v[kChunks], zr[kChunks];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    v[k] = reinterpret_cast<const float4*>(x)[base4 + k * 32 + lane];
    zr[k] = reinterpret_cast<const float4*>(z)[base4 + k * 32 + lane];
    ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
  }
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
#pragma unroll
  for (int k = 0; k < kChunks; ++k) {
    const float4 o = make_float4((wr[k].x * (v[k].x * inv)) * silu_f(zr[k].x), (wr[k].y * (v[k].y * inv)) * silu_f(zr[k].y),
                                 (wr[k].z * (v[k].z * inv)) * silu_f(zr[k].z), (wr[k].w * (v[k].w * inv)) * silu_f(zr[k].w));
    store4<kOutBf16>(out, base4 + k * 32 + lane, o);
  }
}

template <bool kOutBf16>
void launch_gated_vec(int chunks, dim3 g, Stream stream, const float* x, const float* z, const float* w, int64_t rows,
                      int d, float eps, void* out) {
  const char* name = "gated_rms_norm_vec_kernel";
  switch (chunks) {
    case 1: launch_dependent(name, gated_rms_norm_vec_kernel<kOutBf16, 1>, g, 256, 0, stream, x, z, w, rows, d, eps, out); break;
    case 2: launch_dependent(name, gated_rms_norm_vec_kernel<kOutBf16, 2>, g, 256, 0, stream, x, z, w, rows, d, eps, out); break;
    case 3: launch_dependent(name, gated_rms_norm_vec_kernel<kOutBf16, 3>, g, 256, 0, stream, x, z, w, rows, d, eps, out); break;
    default: launch_dependent(name, gated_rms_norm_vec_kernel<kOutBf16, 4>, g, 256, 0, stream, x, z, w, rows, d, eps, out); break;
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

// Calls f(IB, OB) with std::bool_constant arguments: the kernel instantiation for bf16 (or
// f32) input and output, chosen once for every launch shape below.
template <typename F>
void with_io_types(bool ib, bool ob, F&& f) {
  if (ib && ob)
    f(std::true_type{}, std::true_type{});
  else if (ib)
    f(std::true_type{}, std::false_type{});
  else if (ob)
    f(std::false_type{}, std::true_type{});
  else
    f(std::false_type{}, std::false_type{});
}

void rms_norm(const void* x, DType x_type, const float* w, int64_t rows, int64_t d, float eps, void* out,
              DType out_type, Stream stream) {
  if (rows == 0) return;
  check_rows(rows);
  const Stream s = stream;
  const bool ib = x_type == DType::bf16, ob = out_type == DType::bf16;
  const dim3 grid(static_cast<unsigned>(rows));
  with_io_types(ib, ob, [&](auto IB, auto OB) {
    constexpr bool kIn = decltype(IB)::value, kOut = decltype(OB)::value;
    if (d <= kWarpRowMax) {
      launch_dependent("rms_norm_warp_kernel", rms_norm_warp_kernel<kIn, kOut>, dim3(grid_for(rows, 8)), 256, 0, s, x,
                       w, rows, static_cast<int>(d), eps, out);
    } else if (vec_row_ok(d, x, w, out)) {
      const auto t = static_cast<unsigned>(d / (4 * kVecChunks));
      launch_dependent("rms_norm_vec_kernel", rms_norm_vec_kernel<kIn, kOut>, grid, t, 0, s, x, w,
                       static_cast<int>(d), eps, out);
    } else if (d <= int64_t{kRowThreads} * kRowRegs) {
      launch_dependent("rms_norm_row_kernel", rms_norm_row_kernel<kIn, kOut>, grid, kRowThreads, 0, s, x, w,
                       static_cast<int>(d), eps, out);
    } else {
      launch_dependent("rms_norm_kernel", rms_norm_kernel<kIn, kOut>, grid, threads_for(d), 0, s, x, w, d, eps, out);
    }
  });
}

void gated_rms_norm(const float* x, const float* z, const float* w, int64_t rows, int64_t d, float eps, void* out,
                    DType out_type, Stream stream) {
  if (rows == 0) return;
  check_rows(rows);
  const auto al = [](const void* p) { return aligned_to(p, 16); };
  if (d % 128 == 0 && d <= kWarpRowMax && al(x) && al(z) && al(w) && al(out)) {
    const dim3 g(grid_for(rows, 8));
    const int di = static_cast<int>(d);
    if (out_type == DType::bf16)
      launch_gated_vec<true>(di / 128, g, stream, x, z, w, rows, di, eps, out);
    else
      launch_gated_vec<false>(di / 128, g, stream, x, z, w, rows, di, eps, out);
    return;
  }
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
