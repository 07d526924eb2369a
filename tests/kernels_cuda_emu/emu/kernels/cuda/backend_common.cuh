// kernels/cuda/backend_common.cuh's helpers that the delta-rule kernels use, on the CPU
// emulation (tests/kernels_cuda_emu/gpu_emu.h): a launch runs the grid at once.
#pragma once

#include <cstddef>

#include "kernels/cuda/backend_ops.h"
#include "tests/kernels_cuda_emu/gpu_emu.h"

using cudaError_t = int;
constexpr int cudaFuncAttributeMaxDynamicSharedMemorySize = 0;
template <class K>
cudaError_t cudaFuncSetAttribute(K, int, int) {
  return 0;
}

namespace ds::cuda::ops {

inline void check_cuda(cudaError_t, const char*) {}

inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

inline void wait_for_previous_kernel() {}

template <class Kernel, class... Args>
void launch_dependent(const char*, Kernel kernel, dim3 grid, dim3 block, size_t smem, Stream, Args... args) {
  if (smem > emu::kSmemBytes) throw std::invalid_argument("emulated launch: too much shared memory");
  emu::launch(grid, block, [&] { kernel(args...); });
}

}  // namespace ds::cuda::ops
