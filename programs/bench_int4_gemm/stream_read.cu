#include "programs/bench_int4_gemm/stream_read.h"

#include <cstdint>

#include "kernels/cuda/backend_common.cuh"

namespace ds::bench {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;  // 64 warps an SM: the most an SM holds
constexpr int kInFlight = 4;     // 16-byte loads in flight a thread

__global__ void __launch_bounds__(kThreads) stream_read_kernel(const uint4* __restrict__ p, int64_t n, unsigned* sink) {
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  unsigned acc = 0;
  int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  for (; i + (kInFlight - 1) * stride < n; i += kInFlight * stride) {
    uint4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) v[u] = __ldg(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  acc = __reduce_xor_sync(0xffffffffu, acc);
  __shared__ unsigned part[kThreads / 32];
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned s = 0;
    for (int w = 0; w < kThreads / 32; ++w) s ^= part[w];
    sink[blockIdx.x] = s;
  }
}

}  // namespace

size_t stream_read_sink_words(int sm_count) { return static_cast<size_t>(sm_count) * kBlocksPerSm; }

void stream_read(const void* p, size_t bytes, unsigned* sink, int sm_count, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(bytes / 16);
  stream_read_kernel<<<static_cast<unsigned>(stream_read_sink_words(sm_count)), kThreads, 0, stream>>>(
      static_cast<const uint4*>(p), n, sink);
  cuda::ops::check_cuda(cudaGetLastError(), "stream read kernel");
}

}  // namespace ds::bench
