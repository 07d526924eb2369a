// The launch shape of the tensor-core decode GEMMs over quantised weights (fp8_gemm.cu,
// int4_gemm.cu), kept in one place so the two stay one design: a block of kMmaWarps warps
// owns RT row tiles of 16 weight rows, its warps split K in chunks that stream through a
// per-warp cp.async ring, and the x rows are NT column tiles of 8. The files differ only in
// how a chunk's codes become mma operands; the tile shape per step size, the ring's depth,
// the shared memory, the grid and the epilogues that store the reduced tiles are here.
//
// Internal to kernels/cuda.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/decode_gemm.cuh"

namespace ds::cuda::ops {

inline constexpr int kMmaWarps = 8;  // warps per block

// Chunks in flight per warp (its ring), kStages - 1 at a time: more with two row tiles,
// whose blocks are fewer (one or two per SM) for the same weight.
template <int RT>
inline constexpr int kMmaStagesFor = RT == 2 ? 6 : 4;

// Shared memory of a block: each warp's ring (per stage, 16 bytes of each of a lane's 2·RT
// weight rows; every lane reads back only what it copied itself), later the epilogue's
// partial tiles and 32 floats past them (the SwiGLU epilogue's gate and up sums).
template <int NT, int RT>
constexpr size_t mma_smem_bytes() {
  const size_t ring = size_t{kMmaWarps} * kMmaStagesFor<RT> * 2 * RT * 32 * 16;
  const size_t part = size_t{kMmaWarps} * NT * 4 * 32 * sizeof(float) + 32 * sizeof(float);
  return ring > part ? ring : part;
}

// Calls launch(nt, rt) (std::integral_constant<int, NT>, <int, RT>) with the tile shape for a
// step of M rows, 1 to 64. Two row tiles per block from 17 rows: each block reads x [M, K]
// through the L2 once, so more weight rows per block halve that traffic where it outgrows
// the weights' own.
template <typename Launch>
void with_mma_tiles(int64_t M, Launch&& launch) {
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  if (M <= 8)
    launch(One{}, One{});
  else if (M <= 16)
    launch(Two{}, One{});
  else if (M <= 32)
    launch(std::integral_constant<int, 4>{}, Two{});
  else
    launch(std::integral_constant<int, 8>{}, Two{});
}

// Launches kKernel with a block of kMmaWarps warps per `per_block` of `rows` and kSmem bytes
// of dynamic shared memory, allowed (past the default 48 KiB) before its first launch.
template <auto kKernel, size_t kSmem, typename... Args>
void launch_mma(const char* name, int64_t rows, int per_block, const Stream& stream, Args&&... args) {
  static const bool allowed = (check_cuda(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                               static_cast<int>(kSmem)),
                                          "tensor-core gemm: shared memory attribute"),
                               true);
  (void)allowed;
  launch_dependent(name, kKernel, dim3(grid_for(rows, per_block)), dim3(kMmaWarps * 32), kSmem, stream,
                   std::forward<Args>(args)...);
}

// The GEMM kernels' weight rows: a block owns rows n0 .. n0 + 16·RT - 1 and lane group gid
// takes row gid (h = 0) and gid + 8 (h = 1) of each row tile; rows past N read row N - 1,
// whose sums are not stored.
template <int RT>
__device__ __forceinline__ void mma_block_rows(int64_t n0, int64_t N, int gid, int64_t (&rows)[RT][2]) {
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t n = n0 + 16 * r + 8 * h + gid;
      rows[r][h] = n < N ? n : N - 1;
    }
}

// The GEMM kernels' epilogue: the warps' tiles c of the block's rows from n0, summed
// (mma_tiles_reduce), into out [M, N], or added to it.
template <int NT, int RT>
__device__ __forceinline__ void mma_store_rows(float* part, const float (&c)[RT][NT][4], int64_t n0, int M, int64_t N,
                                               float* out, bool accumulate) {
#pragma unroll
  for (int r = 0; r < RT; ++r)
    mma_tiles_reduce<kMmaWarps, NT>(part, c[r], [&](int m, int g, int j, float sum) {
      const int64_t n = n0 + 16 * r + g + 8 * (j >> 1);
      if (m < M && n < N) {
        float* o = out + static_cast<int64_t>(m) * N + n;
        *o = accumulate ? *o + sum : sum;
      }
    });
}

// The gate_up + SwiGLU kernels' epilogue, for a block that owns act columns i0 .. i0 + 7 (lane
// groups gid the gate rows, gid + 8 the up rows, of one x row): act[i] = silu(gate) * up.
// Gate sums (j = 0) are stored first and read back by the thread of the matching up sum (j = 2).
template <bool kBf16Out>
__device__ __forceinline__ void mma_store_swiglu(float* part, const float (&c)[1][4], int64_t i0, int64_t inter,
                                                 void* act) {
  mma_tiles_reduce<kMmaWarps, 1>(part, c, [&](int m, int g, int j, float sum) {
    if (m == 0 && (j == 0 || j == 2)) part[kMmaWarps * 4 * 32 + j * 8 + g] = sum;
  });
  if (threadIdx.x < 8 && i0 + threadIdx.x < inter) {
    const float g = part[kMmaWarps * 4 * 32 + threadIdx.x], u = part[kMmaWarps * 4 * 32 + 16 + threadIdx.x];
    store_act<kBf16Out>(act, i0 + threadIdx.x, silu_f(g) * u);
  }
}

}  // namespace ds::cuda::ops
