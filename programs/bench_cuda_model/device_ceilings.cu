// Measures the copy bandwidth and the bf16 GEMM rate (see device_ceilings.h): medians of
// repeated timed runs with CUDA events after warm-up, on buffers filled with random bits.
#include "programs/bench_cuda_model/device_ceilings.h"

#include <cublas_v2.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/cuda_context.h"

namespace ds::cuda {
namespace {

// Small random bf16 values (|x| < 1): a random exponent range would overflow the GEMM.
__global__ void fill_kernel(uint16_t* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t z = (static_cast<uint64_t>(i) + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f) - 0.5f;
    p[i] = detail::f32_to_bf16_bits(u);
  }
}

template <class F>
double median_ms(cudaStream_t s, int reps, F&& body) {
  cudaEvent_t a, b;
  ops::check_cuda(cudaEventCreate(&a), "ceilings: event");
  ops::check_cuda(cudaEventCreate(&b), "ceilings: event");
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    ops::check_cuda(cudaEventRecord(a, s), "ceilings: record");
    body();
    ops::check_cuda(cudaEventRecord(b, s), "ceilings: record");
    ops::check_cuda(cudaEventSynchronize(b), "ceilings: sync");
    float ms = 0;
    ops::check_cuda(cudaEventElapsedTime(&ms, a, b), "ceilings: elapsed");
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

DeviceCeilings measure_device_ceilings() {
  CudaContext ctx(0, false);
  cudaStream_t s = ctx.stream();
  DeviceCeilings c;
  cudaDeviceProp prop{};
  ops::check_cuda(cudaGetDeviceProperties(&prop, 0), "ceilings: properties");
  c.gpu = prop.name;
  c.sm_count = prop.multiProcessorCount;

  const int64_t copy_bytes = int64_t{1} << 30;  // 1 GiB each way: far beyond the L2
  void* src = ctx.malloc_device(copy_bytes, "copy ceiling");
  void* dst = ctx.malloc_device(copy_bytes, "copy ceiling");
  fill_kernel<<<4096, 256, 0, s>>>(static_cast<uint16_t*>(src), copy_bytes / 2, 1);
  ops::check_launch("ceilings fill");
  auto copy = [&] { ops::check_cuda(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, s), "ceilings: copy"); };
  copy();
  const double copy_ms = median_ms(s, 10, copy);
  c.copy_bytes_per_s = 2.0 * static_cast<double>(copy_bytes) / (copy_ms * 1e-3);
  cudaFree(src);
  cudaFree(dst);

  const int n = 8192;
  const int64_t elems = int64_t{n} * n;
  auto* a = static_cast<uint16_t*>(ctx.malloc_device(elems * 2, "gemm ceiling"));
  auto* b = static_cast<uint16_t*>(ctx.malloc_device(elems * 2, "gemm ceiling"));
  auto* out = static_cast<uint16_t*>(ctx.malloc_device(elems * 2, "gemm ceiling"));
  fill_kernel<<<4096, 256, 0, s>>>(a, elems, 2);
  fill_kernel<<<4096, 256, 0, s>>>(b, elems, 3);
  ops::check_launch("ceilings fill");
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&] {
    check_cublas(cublasGemmEx(ctx.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF,
                              n, &zero, out, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "ceilings", "cublasGemmEx");
  };
  for (int w = 0; w < 3; ++w) gemm();
  const double gemm_ms = median_ms(s, 10, gemm);
  c.bf16_flops = 2.0 * n * static_cast<double>(n) * n / (gemm_ms * 1e-3);
  cudaFree(a);
  cudaFree(b);
  cudaFree(out);
  ops::check_cuda(cudaStreamSynchronize(s), "ceilings");
  return c;
}

}  // namespace ds::cuda
