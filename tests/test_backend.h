// The backend a test runs the model on: the CPU backend unless DELTASERVE_TEST_BACKEND says
// `cuda` (the CUDA backend as served: bf16) or `cuda-f32` (the CUDA backend in its f32-weight
// reference mode). Tests that use it run unchanged on the GPU machine with the variable set;
// a binary built without CUDA refuses a cuda value instead of silently testing the CPU.
#pragma once

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#ifdef DELTASERVE_HAS_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace ds::test {

inline std::string test_backend_name() {
  const char* v = std::getenv("DELTASERVE_TEST_BACKEND");
  return v && *v ? std::string(v) : std::string("cpu");
}

// Whether the chosen backend computes in reduced precision (bf16), where two runs may
// legitimately flip a near-tie token.
inline bool test_backend_is_bf16() { return test_backend_name() == "cuda"; }

inline std::unique_ptr<kernels::Backend> make_test_backend() {
  const std::string name = test_backend_name();
  if (name == "cpu") return kernels::cpu::make_cpu_backend();
#ifdef DELTASERVE_HAS_CUDA
  if (name == "cuda" || name == "cuda-f32") {
    cuda::CudaBackendOptions o;
    o.f32_weights = name == "cuda-f32";
    return cuda::make_cuda_backend(o);
  }
#endif
  throw std::runtime_error("DELTASERVE_TEST_BACKEND=" + name + ": not a backend of this build (cpu, cuda, cuda-f32)");
}

}  // namespace ds::test
