// RMSNorm kernels of the CUDA backend: the zero-centred RMSNorm (layer norms, final norm,
// q_norm / k_norm) and the DeltaNet gated RMSNorm with SiLU(z). One thread block per row:
// the sum of squares in f32 over the row, then the scaled write (same thread, same element,
// so out may alias x). Writing bf16 here is what feeds the GEMMs without a conversion pass.
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

template <bool kInBf16, bool kOutBf16>
__global__ void rms_norm_kernel(const void* x, const float* w, int64_t d, float eps, void* out) {
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
  __shared__ float red[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += x[base + i] * x[base + i];
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    store_act<kOutBf16>(out, base + i, (w[i] * (x[base + i] * inv)) * silu_f(z[base + i]));
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
              DType out_type, void* stream) {
  if (rows == 0) return;
  check_rows(rows);
  const dim3 grid(static_cast<unsigned>(rows));
  const int t = threads_for(d);
  auto s = as_stream(stream);
  const bool ib = x_type == DType::bf16, ob = out_type == DType::bf16;
  if (ib && ob)
    rms_norm_kernel<true, true><<<grid, t, 0, s>>>(x, w, d, eps, out);
  else if (ib)
    rms_norm_kernel<true, false><<<grid, t, 0, s>>>(x, w, d, eps, out);
  else if (ob)
    rms_norm_kernel<false, true><<<grid, t, 0, s>>>(x, w, d, eps, out);
  else
    rms_norm_kernel<false, false><<<grid, t, 0, s>>>(x, w, d, eps, out);
  check_launch("rms_norm kernel");
}

void gated_rms_norm(const float* x, const float* z, const float* w, int64_t rows, int64_t d, float eps, void* out,
                    DType out_type, void* stream) {
  if (rows == 0) return;
  check_rows(rows);
  const dim3 grid(static_cast<unsigned>(rows));
  const int t = threads_for(d);
  if (out_type == DType::bf16)
    gated_rms_norm_kernel<true><<<grid, t, 0, as_stream(stream)>>>(x, z, w, d, eps, out);
  else
    gated_rms_norm_kernel<false><<<grid, t, 0, as_stream(stream)>>>(x, z, w, d, eps, out);
  check_launch("gated_rms_norm kernel");
}

}  // namespace ds::cuda::ops
