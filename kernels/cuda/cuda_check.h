// Error checks of the CUDA backend's host code: a failed runtime call or kernel launch becomes
// std::runtime_error("cuda backend: <what>: <CUDA error>"), naming the op or kernel.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace ds::cuda::ops {

inline void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("cuda backend: ") + what + ": " + cudaGetErrorString(err));
}
// After a launch: the launch error, if any, named by kernel.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

}  // namespace ds::cuda::ops
