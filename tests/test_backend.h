// The backend a test runs the model on: the CPU backend unless DELTASERVE_TEST_BACKEND says
// `cuda` (the CUDA backend as served: bf16) or `cuda-f32` (the CUDA backend in its f32-weight
// reference mode). Tests that use it run unchanged on the GPU machine with the variable set;
// a binary built without CUDA refuses a cuda value instead of silently testing the CPU.
// make_test_sampler gives an engine the sampler a server would use on that backend (the device
// sampler on CUDA, reading logits left in place: Qwen35ForwardModel's logits_in_place).
#pragma once

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/sampler.h"
#ifdef DELTASERVE_HAS_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_sampler.h"
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

// Whether make_test_sampler samples on the device (the forward model must then leave the
// logits in place).
inline bool test_sampler_on_device() { return test_backend_name() != "cpu"; }

// The sampler of an engine on `backend` (make_test_backend's): the CUDA sampler on a CUDA
// backend, the CPU sampler otherwise.
inline std::unique_ptr<kernels::Sampler> make_test_sampler([[maybe_unused]] kernels::Backend& backend) {
#ifdef DELTASERVE_HAS_CUDA
  if (test_sampler_on_device()) return cuda::make_cuda_sampler(backend);
#endif
  return kernels::cpu::make_cpu_sampler();
}

}  // namespace ds::test
