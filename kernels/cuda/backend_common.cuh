// Device helpers shared by the CUDA backend's kernels: element loads and stores in f32 or
// bf16, block-wide sums, grid sizing, and the launch check that names the failing kernel.
//
// Internal to kernels/cuda (the backend's .cu files include it; the public surface is
// cuda_backend.h and backend_ops.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kv_elements.cuh"
#include "kernels/common/gpu_runtime.h"
#include "kernels/dtype.h"

namespace ds::cuda::ops {

inline unsigned grid_for(int64_t n, int threads) {
  const int64_t g = (n + threads - 1) / threads;
  if (g > 0x7fffffffLL) throw std::invalid_argument("cuda backend: launch too large");
  return static_cast<unsigned>(g < 1 ? 1 : g);
}

// Whether p allows `bytes`-wide vector accesses (the 16-byte paths need it; views into a
// buffer need not be aligned).
inline bool aligned_to(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Element access for activations stored as f32 (kBf16 = false) or bf16 bits.
template <bool kBf16>
__device__ __forceinline__ float load_act(const void* p, int64_t i) {
  if constexpr (kBf16)
    return detail::bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
  else
    return static_cast<const float*>(p)[i];
}
template <bool kBf16>
__device__ __forceinline__ void store_act(void* p, int64_t i, float v) {
  if constexpr (kBf16)
    static_cast<uint16_t*>(p)[i] = detail::f32_to_bf16_bits(v);
  else
    static_cast<float*>(p)[i] = v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the sum.
// `red` is 32 floats of shared memory; the call contains two barriers.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < warps ? red[lane] : 0.0f;
  t = warp_sum(t);
  __syncthreads();  // red may be reused by the caller
  return t;
}

// Programmatic dependent launch (sm_90). The backend's kernels go through launch_dependent():
// the GPU may schedule a kernel's blocks while the previous kernel on the stream drains, which
// hides the launch gap between the few-microsecond kernels of a decode step. Each such kernel
// calls wait_for_previous_kernel() before it touches memory that earlier kernels write or
// read (only loads of constant data, such as weights, may come first); the wait returns once
// the previous kernel has finished and its writes are visible. A Stream that is not `chained`
// launches everything plainly (the wait is then a no-op).
//
// After the wait, the block also signals (griddepcontrol.launch_dependents) that the next
// kernel may launch: once every block of this grid has passed its wait, the next kernel's
// blocks take the SM room this grid leaves, load their weights and park in their own wait,
// instead of being launched only when this grid's last block exits. Signalling after the
// wait (not before) keeps at most one kernel parked behind the running one, and keeps the
// order transitive: a kernel whose wait returned knows every earlier kernel has finished.
__device__ __forceinline__ void wait_for_previous_kernel() {
  DS_GPU_WAIT_PREVIOUS();
  DS_GPU_ALLOW_NEXT();
}

template <typename... Params, typename... Args>
void launch_dependent(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                      const Stream& stream, Args&&... args) {
  check_cuda(gpu::try_launch(kernel, grid, block, smem, static_cast<cudaStream_t>(stream), stream.chained,
                             std::forward<Args>(args)...),
             name);
}

// Row r's position for rotary frequency i (RopePositions in backend_ops.h).
__device__ __forceinline__ float rope_position(const RopePositions& p, int64_t row, int i) {
  return static_cast<float>(p.mrope ? p.mrope[3 * row + p.axis[i]] : p.positions[row]);
}

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

}  // namespace ds::cuda::ops
