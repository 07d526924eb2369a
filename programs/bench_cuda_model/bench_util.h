// What the CUDA benchmark programs share besides the ceilings (device_ceilings.h): list and
// shape options, device copies of host vectors, and the median time of a queued piece of work (bench_cuda_model,
// bench_prefill_attention, bench_deltanet).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace ds::bench {

// "4096,16384" -> {4096, 16384}; empty items are skipped.
inline std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) v.push_back(std::stoll(x));
  return v;
}

// "4096x4096,12288x4096" -> {{4096, 4096}, {12288, 4096}} (N x K weight shapes).
inline std::vector<std::pair<int64_t, int64_t>> parse_shapes(const std::string& s) {
  std::vector<std::pair<int64_t, int64_t>> v;
  std::stringstream ss(s);
  for (std::string one; std::getline(ss, one, ',');) {
    const size_t x = one.find('x');
    if (x != std::string::npos) v.emplace_back(std::stoll(one.substr(0, x)), std::stoll(one.substr(x + 1)));
  }
  return v;
}

// A device copy of h (256 bytes of slack past its end, for vector loads); the caller frees it.
template <typename T>
T* to_device(const std::vector<T>& h) {
  T* d = nullptr;
  cuda::ops::check_cuda(cudaMalloc(&d, h.size() * sizeof(T) + 256), "cudaMalloc");
  cuda::ops::check_cuda(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

// Median milliseconds of `iters` runs of body() (which queues work on `stream`) between two
// CUDA events, after one untimed warm-up run; before() runs ahead of each, untimed.
template <class Before, class Body>
double median_ms(cudaStream_t stream, int iters, Before&& before, Body&& body) {
  cudaEvent_t e0, e1;
  cuda::ops::check_cuda(cudaEventCreate(&e0), "event");
  cuda::ops::check_cuda(cudaEventCreate(&e1), "event");
  std::vector<float> ms;
  for (int i = 0; i <= iters; ++i) {
    before();
    cuda::ops::check_cuda(cudaEventRecord(e0, stream), "record");
    body();
    cuda::ops::check_cuda(cudaEventRecord(e1, stream), "record");
    cuda::ops::check_cuda(cudaEventSynchronize(e1), "sync");
    float t = 0;
    cuda::ops::check_cuda(cudaEventElapsedTime(&t, e0, e1), "elapsed");
    if (i > 0) ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace ds::bench
