// LoRA's gathered shrink and expand (kernels/backend.h, lora_shrink / lora_expand; the
// Punica / S-LoRA shape), over the plan's LoRA tiles (CudaBatchPlan, d_lora_tiles): a tile is
// up to kLoraTileRows rows of one slot, gathered through d_lora_rows, so a block reads its
// slot's A and B once for all of its rows -- once a 16-row piece of a prefill chunk, and once
// for the decode rows of one adapter -- and never reloads them where slots alternate. Rows
// without an adapter are in no tile: their tmp rows and outputs are untouched. A tile of no
// rows (the padding of a recorded step's fixed grid) returns at once. The pools are f32 and
// the ranks small (16 - 64):
//  * shrink: a block per (tile, kShrinkWarps rank indices); the tile's x rows staged in shared
//    memory kShrinkChunk columns at a time; a warp per rank index holds its lanes' A values in
//    registers and keeps a sum per row.
//  * expand: a block per (tile, kExpandThreads output columns); the tile's rank vectors in
//    shared memory; a thread per column reads its B row once and adds the dot product to each
//    of the tile's rows.
// Both are a small fraction of the projection they follow (rank / output width of its FLOPs).
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

constexpr int kShrinkWarps = 8;
constexpr int kShrinkChunk = 128;  // x columns staged a step
constexpr int kExpandThreads = 256;

template <bool kBf16>
__global__ void lora_shrink_kernel(const void* x, int64_t K, const float* a, int64_t R, const LoraTile* tiles,
                                   const int32_t* tile_rows, float* tmp) {
  constexpr int kPerLane = kShrinkChunk / 32;
  __shared__ float xs[kLoraTileRows][kShrinkChunk];
  __shared__ int32_t rs[kLoraTileRows];
  wait_for_previous_kernel();
  const LoraTile tile = tiles[blockIdx.x];
  if (tile.count == 0) return;
  const int64_t i = int64_t{blockIdx.y} * kShrinkWarps + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (threadIdx.x < kLoraTileRows) rs[threadIdx.x] = threadIdx.x < tile.count ? tile_rows[tile.first + threadIdx.x] : -1;
  const float* row_a = a + (static_cast<int64_t>(tile.slot) * R + (i < R ? i : 0)) * K;
  __syncthreads();
  float acc[kLoraTileRows];
#pragma unroll
  for (int r = 0; r < kLoraTileRows; ++r) acc[r] = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += kShrinkChunk) {
    __syncthreads();  // the previous chunk is read
    for (int e = static_cast<int>(threadIdx.x); e < kLoraTileRows * kShrinkChunk; e += kShrinkWarps * 32) {
      const int r = e / kShrinkChunk, k = e % kShrinkChunk;
      const int32_t row = rs[r];
      xs[r][k] = row >= 0 && k0 + k < K ? load_act<kBf16>(x, int64_t{row} * K + k0 + k) : 0.0f;
    }
    __syncthreads();
    if (i >= R) continue;  // the same for the whole warp; it still takes part in the barriers
    float w[kPerLane];
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t k = k0 + lane + 32 * t;
      w[t] = k < K ? row_a[k] : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kLoraTileRows; ++r)
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) acc[r] += w[t] * xs[r][lane + 32 * t];
  }
  if (i >= R) return;
#pragma unroll
  for (int r = 0; r < kLoraTileRows; ++r) {
    const float v = warp_sum(acc[r]);
    if (lane == 0 && rs[r] >= 0) tmp[int64_t{rs[r]} * R + i] = v;
  }
}

__global__ void lora_expand_kernel(const float* tmp, int64_t R, const float* b, int64_t N, const LoraTile* tiles,
                                   const int32_t* tile_rows, float* out, int64_t ld, int64_t col_offset) {
  extern __shared__ float t[];  // [kLoraTileRows, R]
  __shared__ int32_t rs[kLoraTileRows];
  wait_for_previous_kernel();
  const LoraTile tile = tiles[blockIdx.x];
  if (tile.count == 0) return;
  if (static_cast<int>(threadIdx.x) < tile.count) rs[threadIdx.x] = tile_rows[tile.first + threadIdx.x];
  __syncthreads();
  for (int64_t e = threadIdx.x; e < int64_t{tile.count} * R; e += blockDim.x)
    t[e] = tmp[int64_t{rs[e / R]} * R + e % R];
  __syncthreads();
  const int64_t j = int64_t{blockIdx.y} * blockDim.x + threadIdx.x;
  if (j >= N) return;
  const float* w = b + (static_cast<int64_t>(tile.slot) * N + j) * R;
  float acc[kLoraTileRows];
#pragma unroll
  for (int r = 0; r < kLoraTileRows; ++r) acc[r] = 0.0f;
  for (int64_t i = 0; i < R; ++i) {
    const float wi = w[i];
#pragma unroll
    for (int r = 0; r < kLoraTileRows; ++r)
      if (r < tile.count) acc[r] += wi * t[int64_t{r} * R + i];
  }
#pragma unroll
  for (int r = 0; r < kLoraTileRows; ++r)
    if (r < tile.count) out[int64_t{rs[r]} * ld + col_offset + j] += acc[r];
}

size_t expand_shared(int64_t R) { return static_cast<size_t>(kLoraTileRows) * static_cast<size_t>(R) * sizeof(float); }

}  // namespace

void lora_shrink(const void* x, DType x_type, int64_t K, const float* a, int64_t R, const LoraTile* tiles,
                 int32_t n_tiles, const int32_t* tile_rows, float* tmp, Stream stream) {
  if (n_tiles == 0 || R == 0) return;
  const int64_t blocks_y = (R + kShrinkWarps - 1) / kShrinkWarps;
  if (blocks_y > 65535) throw std::invalid_argument("cuda backend: lora_shrink rank too large");
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(blocks_y));
  if (x_type == DType::bf16)
    launch_dependent("lora_shrink_kernel", lora_shrink_kernel<true>, grid, dim3(kShrinkWarps * 32), 0, stream, x, K,
                     a, R, tiles, tile_rows, tmp);
  else
    launch_dependent("lora_shrink_kernel", lora_shrink_kernel<false>, grid, dim3(kShrinkWarps * 32), 0, stream, x, K,
                     a, R, tiles, tile_rows, tmp);
}

void lora_expand(const float* tmp, int64_t R, const float* b, int64_t N, const LoraTile* tiles, int32_t n_tiles,
                 const int32_t* tile_rows, float* out, int64_t ld, int64_t col_offset, Stream stream) {
  if (n_tiles == 0 || N == 0 || R == 0) return;
  const int64_t blocks_y = (N + kExpandThreads - 1) / kExpandThreads;
  if (blocks_y > 65535 || expand_shared(R) > kLoraExpandMaxShared)
    throw std::invalid_argument("cuda backend: lora_expand too large");
  if (expand_shared(R) > 48 * 1024) {
    static const bool opted = [] {
      check_cuda(cudaFuncSetAttribute(lora_expand_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kLoraExpandMaxShared)),
                 "lora_expand_kernel shared memory");
      return true;
    }();
    (void)opted;
  }
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(blocks_y));
  launch_dependent("lora_expand_kernel", lora_expand_kernel, grid, dim3(kExpandThreads), expand_shared(R), stream, tmp,
                   R, b, N, tiles, tile_rows, out, ld, col_offset);
}

}  // namespace ds::cuda::ops
