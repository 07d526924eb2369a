// The merge of a sequence's split chunks (paged_attention.h): their fp32 partials weighted by
// their base-2 log-sum-exps into the output. Plain device code (NVIDIA and HIP).
#include <algorithm>
#include <bit>
#include <cstdint>

#include "kernels/common/gpu_runtime.h"
#include "kernels/cuda/decode_launch.h"
#include "kernels/cuda/kv_elements.cuh"

namespace ds::cuda::detail {
namespace {

// One block per (sequence, query head, slice of head_dim) of kMergeThreads threads, in groups
// of gt (a power of two): thread t of a group owns four elements of the slice, and the
// groups take every G-th chunk and meet in shared memory at the end. After the decode
// kernel's results are visible the block makes three round trips to memory: the chunk
// boundaries, the chunks' log-sum-exps (kept in shared memory as the weights), and the chunk
// outputs, loaded eight at a time per thread so they are in flight together (the boundaries
// are read before the wait). A batch-1 split
// has few (sequence, head) pairs, so head_dim is cut into slices to put more SMs on it.
constexpr int kMergeThreads = 256;
constexpr int kMergeBatch = 1024;  // chunks whose weights sit in shared memory at once
constexpr int kMergeUnroll = 8;
static_assert(kMergeMaxHeadDim == 4 * kMergeThreads, "a block merges four elements per thread");
// Threads per group for a slice of head_dim / slices elements (four per thread).
int merge_group_threads(int D, int slices) {
  return std::min(kMergeThreads, static_cast<int>(std::bit_ceil(static_cast<unsigned>((D / slices + 3) / 4))));
}
// Slices of head_dim per (sequence, head): up to four, while the blocks stay under two per
// SM and each slice is whole 16-thread groups.
int merge_slices(int D, int64_t pairs, int sm_count) {
  int s = 1;
  while (s < 4 && D % (2 * s * 64) == 0 && pairs * 2 * s <= 2 * int64_t{std::max(sm_count, 1)}) s *= 2;
  return s;
}

__global__ void merge_partials_kernel(const float* part_o, const float* part_lse, const int32_t* begin, void* out,
                                      bool out_f32, int n_q_heads, int D, int gt) {
  // The chunk boundaries were copied in before the decode kernel started, so they are read
  // while it drains (from L2: this SM's L1 may still hold an earlier call's); the partials
  // only after the wait.
  const int s = blockIdx.x;
#if DS_GPU_HIP
  const int b = begin[s], e = begin[s + 1];
#else
  const int b = __ldcg(begin + s), e = __ldcg(begin + s + 1);
#endif
  DS_GPU_WAIT_PREVIOUS();  // the decode kernel's partials are complete
  DS_GPU_ALLOW_NEXT();
  __shared__ float w[kMergeBatch];
  __shared__ float red[kMergeThreads / 32];
  __shared__ float4 others[kMergeThreads];
  const int h = blockIdx.y, tid = threadIdx.x, nt = blockDim.x;
  const int groups = nt / gt, g = tid / gt, lt = tid - g * gt;
  if (e - b <= 1) return;  // the only chunk wrote the output itself
  const float neg_inf = -__builtin_huge_valf();
  auto block_reduce = [&](float v, bool is_max) {
    for (int off = 16; off > 0; off >>= 1) {
#if DS_GPU_HIP
      const float o = __shfl_xor(v, off);
#else
      const float o = __shfl_xor_sync(0xffffffffu, v, off);
#endif
      v = is_max ? fmaxf(v, o) : v + o;
    }
    __syncthreads();
    if ((tid & 31) == 0) red[tid >> 5] = v;
    __syncthreads();
    v = is_max ? neg_inf : 0.f;
    for (int i = 0; i < (nt + 31) / 32; ++i) v = is_max ? fmaxf(v, red[i]) : v + red[i];
    return v;
  };
  auto lse = [&](int p) { return part_lse[static_cast<int64_t>(p) * n_q_heads + h]; };
  // The first kMergeBatch chunks' log-sum-exps, then their weights 2^(lse - M), stay in w;
  // each thread touches only its own entries until the reductions' barriers.
  float M = neg_inf;
  for (int p = b + tid; p < e; p += nt) {
    const float x = lse(p);
    if (p - b < kMergeBatch) w[p - b] = x;
    M = fmaxf(M, x);
  }
  M = block_reduce(M, true);
  float L = 0.f;
  if (M != neg_inf)
    for (int p = b + tid; p < e; p += nt) {
      const float x = exp2f((p - b < kMergeBatch ? w[p - b] : lse(p)) - M);
      if (p - b < kMergeBatch) w[p - b] = x;
      L += x;
    }
  L = block_reduce(L, false);  // its barriers also publish w
  const int d0 = blockIdx.z * 4 * gt + 4 * lt;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int p0 = b; M != neg_inf && p0 < e; p0 += kMergeBatch) {
    const int n = min(kMergeBatch, e - p0);
    if (p0 != b) {
      __syncthreads();
      for (int i = tid; i < n; i += nt) w[i] = exp2f(lse(p0 + i) - M);
      __syncthreads();
    }
    if (d0 >= D) continue;
    const float* src = part_o + (static_cast<int64_t>(p0) * n_q_heads + h) * D + d0;
    const int64_t step = static_cast<int64_t>(n_q_heads) * D;
    for (int i = g; i < n; i += kMergeUnroll * groups) {
      float4 v[kMergeUnroll];
#pragma unroll
      for (int k = 0; k < kMergeUnroll; ++k) {
        const int j = i + k * groups;
        v[k] = j < n ? *reinterpret_cast<const float4*>(src + j * step) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int k = 0; k < kMergeUnroll; ++k) {
        const int j = i + k * groups;
        const float x = j < n ? w[j] : 0.f;
        acc.x += x * v[k].x;
        acc.y += x * v[k].y;
        acc.z += x * v[k].z;
        acc.w += x * v[k].w;
      }
    }
  }
  if (g > 0 && d0 < D) others[tid] = acc;
  __syncthreads();
  if (g == 0 && d0 < D) {
    for (int k = 1; k < groups; ++k) {
      const float4 v = others[k * gt + lt];
      acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
    }
    const float inv = L > 0.f ? 1.f / L : 0.f;
    acc = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    const int64_t o = (static_cast<int64_t>(s) * n_q_heads + h) * D + d0;
    if (out_f32) {
      *reinterpret_cast<float4*>(static_cast<float*>(out) + o) = acc;
    } else {
      uint32_t* ob = reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(out) + o);
      ob[0] = f32_to_bf16_bits(acc.x) | (static_cast<uint32_t>(f32_to_bf16_bits(acc.y)) << 16);
      ob[1] = f32_to_bf16_bits(acc.z) | (static_cast<uint32_t>(f32_to_bf16_bits(acc.w)) << 16);
    }
  }
}

}  // namespace

void launch_merge(const MergeArgs& m, void* stream, bool chained) {
  const int slices = merge_slices(m.head_dim, int64_t{m.n_seqs} * m.n_q_heads, m.sm_count);
  const int gt = merge_group_threads(m.head_dim, slices);
  const dim3 grid(static_cast<unsigned>(m.n_seqs), static_cast<unsigned>(m.n_q_heads), static_cast<unsigned>(slices));
  gpu::launch(merge_partials_kernel, grid, dim3(kMergeThreads), 0, static_cast<gpuStream_t>(stream), chained, m.part_o,
              m.part_lse, m.seq_item_begin, m.out, m.out_f32, static_cast<int>(m.n_q_heads), static_cast<int>(m.head_dim),
              gt);
}

}  // namespace ds::cuda::detail
