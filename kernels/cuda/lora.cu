// LoRA's gathered shrink and expand (kernels/backend.h, lora_shrink / lora_expand; the
// Punica / S-LoRA shape), over the plan's LoRA tiles (CudaBatchPlan, d_lora_tiles): a tile is
// up to kLoraTileRows rows of one slot, gathered through d_lora_rows, so a block reads its
// slot's A and B once for all of its rows -- once a 16-row piece of a prefill chunk, and once
// for the decode rows of one adapter -- and never reloads them where slots alternate. Rows
// without an adapter are in no tile: their tmp rows and outputs are untouched. A tile of no
// rows (the padding of a recorded step's fixed grid) returns at once. The pools are f32 and
// the ranks small (16 - 64):
//  * shrink: a block per (tile, kShrinkWarps rank indices, kShrinkSplit columns of K); the
//    tile's x rows staged in shared memory kShrinkChunk columns at a time; a warp per rank
//    index holds its lanes' A values in registers and keeps a sum per row. The splits' partial
//    sums go to scratch and the last block of a tile adds them in a fixed order (deterministic).
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
// Columns of K a shrink block takes: a decode step has few tiles (one per adapter in the
// batch), so K is split across blocks to keep the GPU busy (bench-log 2026-12-07, "LoRA").
constexpr int kShrinkSplit = 4 * kShrinkChunk;
constexpr int kExpandThreads = 256;

template <bool kBf16>
__global__ void lora_shrink_kernel(const void* x, int64_t rows, int64_t K, const float* a, int64_t R,
                                   const LoraTile* tiles, const int32_t* tile_rows, float* tmp, float* partials,
                                   int32_t* counters) {
  constexpr int kPerLane = kShrinkChunk / 32;
  __shared__ float xs[kLoraTileRows][kShrinkChunk];
  __shared__ int32_t rs[kLoraTileRows];
  __shared__ bool last;
  wait_for_previous_kernel();
  const LoraTile tile = tiles[blockIdx.x];
  if (tile.count == 0) return;
  const int64_t i = int64_t{blockIdx.y} * kShrinkWarps + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int splits = static_cast<int>(gridDim.z), z = static_cast<int>(blockIdx.z);
  if (threadIdx.x < kLoraTileRows) rs[threadIdx.x] = threadIdx.x < tile.count ? tile_rows[tile.first + threadIdx.x] : -1;
  const float* row_a = a + (static_cast<int64_t>(tile.slot) * R + (i < R ? i : 0)) * K;
  __syncthreads();
  float acc[kLoraTileRows];
#pragma unroll
  for (int r = 0; r < kLoraTileRows; ++r) acc[r] = 0.0f;
  const int64_t split_end = int64_t{z + 1} * kShrinkSplit, k_end = split_end < K ? split_end : K;
  for (int64_t k0 = int64_t{z} * kShrinkSplit; k0 < k_end; k0 += kShrinkChunk) {
    __syncthreads();  // the previous chunk is read
    for (int e = static_cast<int>(threadIdx.x); e < kLoraTileRows * kShrinkChunk; e += kShrinkWarps * 32) {
      const int r = e / kShrinkChunk, k = e % kShrinkChunk;
      const int32_t row = rs[r];
      xs[r][k] = row >= 0 && k0 + k < k_end ? load_act<kBf16>(x, int64_t{row} * K + k0 + k) : 0.0f;
    }
    __syncthreads();
    if (i >= R) continue;  // the same for the whole warp; it still takes part in the barriers
    float w[kPerLane];
#pragma unroll
    for (int t = 0; t < kPerLane; ++t) {
      const int64_t k = k0 + lane + 32 * t;
      w[t] = k < k_end ? row_a[k] : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kLoraTileRows; ++r)
#pragma unroll
      for (int t = 0; t < kPerLane; ++t) acc[r] += w[t] * xs[r][lane + 32 * t];
  }
  // One split: the sums are the result. Several: each block leaves its partial sums, and the
  // last of a (tile, rank group)'s blocks to finish adds them up in split order (the same order
  // every time, whichever block is last), then re-arms the counter for the next launch.
  float* out = splits == 1 ? tmp : partials + int64_t{z} * rows * R;
  if (i < R) {
#pragma unroll
    for (int r = 0; r < kLoraTileRows; ++r) {
      const float v = warp_sum(acc[r]);
      if (lane == 0 && rs[r] >= 0) out[int64_t{rs[r]} * R + i] = v;
    }
  }
  if (splits == 1) return;
  __threadfence();
  __syncthreads();
  int32_t* counter = counters + int64_t{blockIdx.x} * gridDim.y + blockIdx.y;
  if (threadIdx.x == 0) last = atomicAdd(counter, 1) == splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int e = static_cast<int>(threadIdx.x); e < tile.count * kShrinkWarps; e += kShrinkWarps * 32) {
    const int64_t row = rs[e / kShrinkWarps], ii = int64_t{blockIdx.y} * kShrinkWarps + e % kShrinkWarps;
    if (ii >= R) continue;
    float sum = 0.0f;
    for (int q = 0; q < splits; ++q) sum += __ldcg(partials + (int64_t{q} * rows + row) * R + ii);
    tmp[row * R + ii] = sum;
  }
  if (threadIdx.x == 0) *counter = 0;
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

int32_t lora_shrink_splits(int64_t K) { return static_cast<int32_t>((K + kShrinkSplit - 1) / kShrinkSplit); }

int64_t lora_shrink_counters(int32_t n_tiles, int64_t R) {
  return int64_t{n_tiles} * ((R + kShrinkWarps - 1) / kShrinkWarps);
}

void lora_shrink(const void* x, DType x_type, int64_t rows, int64_t K, const float* a, int64_t R, const LoraTile* tiles,
                 int32_t n_tiles, const int32_t* tile_rows, float* tmp, float* partials, int32_t* counters,
                 Stream stream) {
  if (n_tiles == 0 || R == 0) return;
  const int64_t blocks_y = (R + kShrinkWarps - 1) / kShrinkWarps;
  const int32_t splits = lora_shrink_splits(K);
  if (blocks_y > 65535 || splits > 65535) throw std::invalid_argument("cuda backend: lora_shrink too large");
  if (splits > 1 && (!partials || !counters)) throw std::invalid_argument("cuda backend: lora_shrink needs its scratch");
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(blocks_y), static_cast<unsigned>(splits));
  if (x_type == DType::bf16)
    launch_dependent("lora_shrink_kernel", lora_shrink_kernel<true>, grid, dim3(kShrinkWarps * 32), 0, stream, x, rows,
                     K, a, R, tiles, tile_rows, tmp, partials, counters);
  else
    launch_dependent("lora_shrink_kernel", lora_shrink_kernel<false>, grid, dim3(kShrinkWarps * 32), 0, stream, x,
                     rows, K, a, R, tiles, tile_rows, tmp, partials, counters);
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
