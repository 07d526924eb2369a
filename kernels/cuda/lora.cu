// LoRA's gathered shrink and expand (kernels/backend.h, lora_shrink / lora_expand; the
// Punica / S-LoRA shape): every row reads the A and B of its own slot, so one launch serves a
// batch that mixes adapters and the base. The pools are f32 and the ranks small (16 - 64).
// A block takes a tile of kTileRows consecutive rows -- a sequence's rows are consecutive and
// share its slot -- so a slot's A and B are read once a tile, not once a row: a prefill chunk
// of 2,048 rows read each target's A 2,048 times when a block took one row (bench-log
// 2026-12-06, "LoRA, the host tier, ...").
//  * shrink: the tile's x staged in shared memory kShrinkChunk columns at a time; a warp per
//    rank index (kShrinkRanks a block) holds its lanes' A values in registers, reloaded where
//    the slot changes along the tile, and keeps a sum per row; rows without an adapter write
//    zeros.
//  * expand: the tile's rank vectors in shared memory; a thread per output column runs down the
//    tile's rows, reading its column's B row (L1 after the tile's first row of a slot) and
//    adding the dot product to the output. Rows without an adapter are untouched.
// Both are a small fraction of the projection they follow (rank / output width of its FLOPs).
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops {
namespace {

constexpr int kTileRows = 16;
constexpr int kShrinkThreads = 256;
constexpr int kShrinkWarps = kShrinkThreads / 32;
constexpr int kShrinkRanks = 32;  // rank indices a block takes
constexpr int kShrinkChunk = 128;  // x columns staged a step
constexpr int kExpandThreads = 256;
constexpr size_t kExpandShared = 48 * 1024;  // the tile's rank vectors: fewer rows a tile at large ranks

template <bool kBf16>
__global__ void lora_shrink_kernel(const void* x, int64_t rows, int64_t K, const float* a, int64_t R,
                                   const int32_t* slots, float* tmp) {
  constexpr int kPerWarp = kShrinkRanks / kShrinkWarps;
  constexpr int kPerLane = kShrinkChunk / 32;
  __shared__ float xs[kTileRows][kShrinkChunk];
  __shared__ int32_t ss[kTileRows];
  const int64_t r0 = int64_t{blockIdx.x} * kTileRows;
  const int64_t i0 = int64_t{blockIdx.y} * kShrinkRanks;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  wait_for_previous_kernel();
  if (threadIdx.x < kTileRows) ss[threadIdx.x] = r0 + threadIdx.x < rows ? slots[r0 + threadIdx.x] : -1;
  __syncthreads();
  float acc[kPerWarp][kTileRows];
#pragma unroll
  for (int j = 0; j < kPerWarp; ++j)
#pragma unroll
    for (int r = 0; r < kTileRows; ++r) acc[j][r] = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += kShrinkChunk) {
    __syncthreads();  // the previous chunk is read
    for (int e = static_cast<int>(threadIdx.x); e < kTileRows * kShrinkChunk; e += kShrinkThreads) {
      const int r = e / kShrinkChunk, k = e % kShrinkChunk;
      const int64_t row = r0 + r, col = k0 + k;
      xs[r][k] = row < rows && col < K ? load_act<kBf16>(x, row * K + col) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kPerWarp; ++j) {
      const int64_t i = i0 + warp + int64_t{kShrinkWarps} * j;
      if (i >= R) break;  // the same for the whole warp
      int32_t loaded = -1;
      float w[kPerLane];
#pragma unroll
      for (int r = 0; r < kTileRows; ++r) {
        const int32_t s = ss[r];  // the same for the whole block
        if (s < 0) continue;
        if (s != loaded) {
          const float* row_a = a + (static_cast<int64_t>(s) * R + i) * K + k0;
#pragma unroll
          for (int t = 0; t < kPerLane; ++t) {
            const int64_t k = lane + 32 * t;
            w[t] = k0 + k < K ? row_a[k] : 0.0f;
          }
          loaded = s;
        }
#pragma unroll
        for (int t = 0; t < kPerLane; ++t) acc[j][r] += w[t] * xs[r][lane + 32 * t];
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kPerWarp; ++j) {
    const int64_t i = i0 + warp + int64_t{kShrinkWarps} * j;
    if (i >= R) break;
#pragma unroll
    for (int r = 0; r < kTileRows; ++r) {
      const float v = warp_sum(acc[j][r]);
      if (lane == 0 && r0 + r < rows) tmp[(r0 + r) * R + i] = ss[r] < 0 ? 0.0f : v;
    }
  }
}

__global__ void lora_expand_kernel(const float* tmp, int64_t rows, int64_t R, const float* b, int64_t N,
                                   const int32_t* slots, float* out, int64_t ld, int64_t col_offset, int tile) {
  extern __shared__ float t[];  // [tile, R]
  __shared__ int32_t ss[kTileRows];
  const int64_t r0 = int64_t{blockIdx.x} * tile;
  wait_for_previous_kernel();
  if (static_cast<int>(threadIdx.x) < tile) ss[threadIdx.x] = r0 + threadIdx.x < rows ? slots[r0 + threadIdx.x] : -1;
  for (int64_t e = threadIdx.x; e < tile * R; e += blockDim.x) {
    const int64_t row = r0 + e / R;
    t[e] = row < rows ? tmp[row * R + e % R] : 0.0f;
  }
  __syncthreads();
  const int64_t j = int64_t{blockIdx.y} * blockDim.x + threadIdx.x;
  if (j >= N) return;
  for (int r = 0; r < tile; ++r) {
    const int32_t s = ss[r];
    if (s < 0) continue;
    const float* w = b + (static_cast<int64_t>(s) * N + j) * R;
    const float* v = t + static_cast<int64_t>(r) * R;
    float acc = 0.0f;
    for (int64_t i = 0; i < R; ++i) acc += w[i] * v[i];
    out[(r0 + r) * ld + col_offset + j] += acc;
  }
}

}  // namespace

void lora_shrink(const void* x, DType x_type, int64_t rows, int64_t K, const float* a, int64_t R,
                 const int32_t* slots, float* tmp, Stream stream) {
  if (rows == 0 || R == 0) return;
  const int64_t blocks_x = (rows + kTileRows - 1) / kTileRows, blocks_y = (R + kShrinkRanks - 1) / kShrinkRanks;
  if (blocks_y > 65535 || blocks_x > 0x7fffffffLL) throw std::invalid_argument("cuda backend: lora_shrink too large");
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(blocks_y));
  if (x_type == DType::bf16)
    launch_dependent("lora_shrink_kernel", lora_shrink_kernel<true>, grid, dim3(kShrinkThreads), 0, stream, x, rows,
                     K, a, R, slots, tmp);
  else
    launch_dependent("lora_shrink_kernel", lora_shrink_kernel<false>, grid, dim3(kShrinkThreads), 0, stream, x, rows,
                     K, a, R, slots, tmp);
}

void lora_expand(const float* tmp, int64_t rows, int64_t R, const float* b, int64_t N, const int32_t* slots,
                 float* out, int64_t ld, int64_t col_offset, Stream stream) {
  if (rows == 0 || N == 0 || R == 0) return;
  const int64_t blocks_y = (N + kExpandThreads - 1) / kExpandThreads;
  const int64_t fit = static_cast<int64_t>(kExpandShared / sizeof(float)) / R;
  if (blocks_y > 65535 || fit < 1) throw std::invalid_argument("cuda backend: lora_expand too large");
  const int tile = static_cast<int>(std::min<int64_t>(kTileRows, fit));
  const int64_t blocks_x = (rows + tile - 1) / tile;
  if (blocks_x > 0x7fffffffLL) throw std::invalid_argument("cuda backend: lora_expand too large");
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(blocks_y));
  launch_dependent("lora_expand_kernel", lora_expand_kernel, grid, dim3(kExpandThreads),
                   static_cast<size_t>(tile) * static_cast<size_t>(R) * sizeof(float), stream, tmp, rows, R, b, N,
                   slots, out, ld, col_offset, tile);
}

}  // namespace ds::cuda::ops
