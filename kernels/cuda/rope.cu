// Partial rotate-half RoPE of the CUDA backend, in place on [rows, heads, D]: dims [0, R)
// rotate in pairs (i, i + R/2), the rest pass through. The angle follows the CPU backend's
// (and HF's) float32 recipe, angle = f32(p * inv_freq_i), with cos and sin taken in double
// of that f32 angle, so both backends rotate by the same rounded angle at any position; cos
// and sin are multiplied by the attention scaling (YaRN's; 1 otherwise) in f32.
// One thread per (row, head, pair). With M-RoPE each frequency reads its axis's position.
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

__global__ void rope_kernel(float* x, RopePositions positions, int64_t rows, int64_t heads, int64_t d, int64_t half,
                            const float* inv_freq, float scale) {
  wait_for_previous_kernel();
  const int64_t n = rows * heads * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = i % half, rh = i / half, row = rh / heads;
    const float angle = rope_position(positions, row, static_cast<int>(k)) * inv_freq[k];
    const float c = static_cast<float>(cos(static_cast<double>(angle))) * scale;
    const float s = static_cast<float>(sin(static_cast<double>(angle))) * scale;
    float* v = x + rh * d;
    const float x1 = v[k], x2 = v[k + half];
    v[k] = x1 * c - x2 * s;
    v[k + half] = x2 * c + x1 * s;
  }
}

}  // namespace

void rope(float* x, const RopePositions& positions, int64_t rows, int64_t heads, int64_t d, int64_t rotary,
          const float* inv_freq, float scale, Stream stream) {
  const int64_t half = rotary / 2, n = rows * heads * half;
  if (n == 0) return;
  const int64_t g = (n + 255) / 256;
  launch_dependent("rope_kernel", rope_kernel, static_cast<unsigned>(g > 65536 ? 65536 : g), 256, 0, stream, x, positions, rows, heads, d,
                                                                                            half, inv_freq, scale);
}

}  // namespace ds::cuda::ops
