// LoRA's gathered shrink and expand (kernels/backend.h, lora_shrink / lora_expand; the
// Punica / S-LoRA shape): every row reads the A and B of its own slot, so one launch serves a
// batch that mixes adapters and the base. The pools are f32 and the ranks small (16 - 64):
//  * shrink: one warp per (row, rank index): a dot product of the row's input with one row of
//    its slot's A, lanes striding over K, a warp sum. Rows without an adapter write zeros.
//  * expand: one thread per (row, output column): the row's rank vector staged in shared
//    memory, a dot product with one row of its slot's B, added to the output. Rows without an
//    adapter return at once.
// Both are a small fraction of the projection they follow (rank / output width of its FLOPs).
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

constexpr int kShrinkWarps = 8;
constexpr int kExpandThreads = 256;

template <bool kBf16>
__global__ void lora_shrink_kernel(const void* x, int64_t K, const float* a, int64_t R, const int32_t* slots,
                                   float* tmp) {
  const int64_t row = blockIdx.x;
  const int64_t i = int64_t{blockIdx.y} * kShrinkWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  wait_for_previous_kernel();
  if (i >= R) return;
  const int32_t s = slots[row];
  if (s < 0) {
    if (lane == 0) tmp[row * R + i] = 0.0f;
    return;
  }
  const float* w = a + (static_cast<int64_t>(s) * R + i) * K;
  float acc = 0.0f;
  for (int64_t k = lane; k < K; k += 32) acc += w[k] * load_act<kBf16>(x, row * K + k);
  acc = warp_sum(acc);
  if (lane == 0) tmp[row * R + i] = acc;
}

__global__ void lora_expand_kernel(const float* tmp, int64_t R, const float* b, int64_t N, const int32_t* slots,
                                   float* out, int64_t ld, int64_t col_offset) {
  extern __shared__ float t[];
  const int64_t row = blockIdx.x;
  wait_for_previous_kernel();
  const int32_t s = slots[row];
  if (s < 0) return;
  for (int64_t i = threadIdx.x; i < R; i += blockDim.x) t[i] = tmp[row * R + i];
  __syncthreads();
  const int64_t j = int64_t{blockIdx.y} * blockDim.x + threadIdx.x;
  if (j >= N) return;
  const float* w = b + (static_cast<int64_t>(s) * N + j) * R;
  float acc = 0.0f;
  for (int64_t i = 0; i < R; ++i) acc += w[i] * t[i];
  out[row * ld + col_offset + j] += acc;
}

}  // namespace

void lora_shrink(const void* x, DType x_type, int64_t rows, int64_t K, const float* a, int64_t R,
                 const int32_t* slots, float* tmp, Stream stream) {
  if (rows == 0 || R == 0) return;
  if (R > 65535LL * kShrinkWarps || rows > 0x7fffffffLL) throw std::invalid_argument("cuda backend: lora_shrink too large");
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((R + kShrinkWarps - 1) / kShrinkWarps));
  if (x_type == DType::bf16)
    launch_dependent("lora_shrink_kernel", lora_shrink_kernel<true>, grid, dim3(kShrinkWarps * 32), 0, stream, x, K, a,
                     R, slots, tmp);
  else
    launch_dependent("lora_shrink_kernel", lora_shrink_kernel<false>, grid, dim3(kShrinkWarps * 32), 0, stream, x, K,
                     a, R, slots, tmp);
}

void lora_expand(const float* tmp, int64_t rows, int64_t R, const float* b, int64_t N, const int32_t* slots,
                 float* out, int64_t ld, int64_t col_offset, Stream stream) {
  if (rows == 0 || N == 0 || R == 0) return;
  const int64_t blocks_y = (N + kExpandThreads - 1) / kExpandThreads;
  if (blocks_y > 65535 || rows > 0x7fffffffLL || R > 8192)
    throw std::invalid_argument("cuda backend: lora_expand too large");
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(blocks_y));
  launch_dependent("lora_expand_kernel", lora_expand_kernel, grid, dim3(kExpandThreads),
                   static_cast<size_t>(R) * sizeof(float), stream, tmp, R, b, N, slots, out, ld, col_offset);
}

}  // namespace ds::cuda::ops
