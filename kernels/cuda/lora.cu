// LoRA's gathered shrink and expand (kernels/backend.h, lora_shrink / lora_expand; the
// Punica / S-LoRA shape), over the plan's LoRA tiles (CudaBatchPlan, d_lora_tiles): a tile is
// up to kLoraTileRows rows of one slot, gathered through d_lora_rows, so a block reads its
// slot's A and B once for all of its rows -- once a 16-row piece of a prefill chunk, and once
// for the decode rows of one adapter -- and never reloads them where slots alternate. Rows
// without an adapter are in no tile: their tmp rows and outputs are untouched. A tile of no
// rows (the padding of a recorded step's fixed grid) returns at once. The pools are f32 and
// the ranks small (16 - 64 a projection; a shrink shared by the projections of one input stacks
// theirs, up to 6x), so both kernels are a few microseconds of loads: what they are built around
// is the length of each block's chain of dependent loads (bench-log 2026-12-07, "LoRA: the tiles
// with split-K shrink": a 9B decode step ran 248 of each; with the shared shrinks and one
// expand launch per group it runs 128 of each).
//  * Before the wait for the previous kernel, a block reads what no kernel of the step writes:
//    its tile, its rows' indices and its slot's first A or B values. After it, everything else
//    it needs is requested at once (x, or tmp and the output values), then summed.
//  * shrink: a block per (tile, kRanks rank indices); its threads stripe K four columns at a
//    time and keep a sum per (row, rank), then the block adds them up in a fixed order
//    (deterministic, no split of K across blocks). kRanks is 1 for steps of up to
//    kShrinkOneRankRows rows and 4 for longer ones.
//  * expand: a block per (tile, kThreads output columns); a thread per column holds its B row
//    in registers, 16 ranks at a time, and adds its dot product with each row's rank vector
//    (the tile's tmp rows, staged in shared memory) to that row's output. Its ranks are a
//    column range of tmp's rows (ld_tmp apart): projections that read one input share one
//    shrink into a wider tmp (model/qwen35/lora_slots.h), and each expands from its range.
//    One launch serves up to four such projections (a group's expands): the grid's column
//    blocks run over their outputs' columns one projection after the other, and a block finds
//    its projection in a table passed by value. A block's work is what a launch of its
//    projection alone would give it, so the sums are the same bit for bit.
#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/decode_launch.h"  // detail::ensure_smem_limit

namespace ds::cuda::ops {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRankChunk = 16;  // B values a thread holds at once in the expand
// Steps of up to this many rows take one rank a shrink block (decode steps: few tiles of few
// rows, so more blocks pull the pool's bytes); longer ones four (prefill chunks: x read from
// the L2 by fewer blocks). By rows, not tiles: a recorded step's grid has a tile per row, most
// of them empty.
constexpr int64_t kShrinkOneRankRows = 512;

// Four consecutive values from k (k + 3 < n, or the missing ones 0) of an f32 row; `vec`: the
// rows are 16-byte aligned and a multiple of 4 long (k is a multiple of 4).
__device__ __forceinline__ float4 load4(const float* row, int64_t k, int64_t n, bool vec) {
  if (vec && k + 3 < n) return __ldg(reinterpret_cast<const float4*>(row + k));
  float v[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) v[e] = k + e < n ? __ldg(row + k + e) : 0.0f;
  return make_float4(v[0], v[1], v[2], v[3]);
}

// The same from an activation row, f32 or bf16 (8-byte aligned for `vec`).
template <bool kBf16>
__device__ __forceinline__ float4 load4_act(const void* row, int64_t k, int64_t n, bool vec) {
  if constexpr (kBf16) {
    const uint16_t* r = static_cast<const uint16_t*>(row);
    if (vec && k + 3 < n) {
      const uint2 u = *reinterpret_cast<const uint2*>(r + k);
      return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                         __uint_as_float(u.y & 0xffff0000u));
    }
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = k + e < n ? detail::bf16_bits_to_f32(r[k + e]) : 0.0f;
    return make_float4(v[0], v[1], v[2], v[3]);
  } else {
    const float* r = static_cast<const float*>(row);
    if (vec && k + 3 < n) return *reinterpret_cast<const float4*>(r + k);
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = k + e < n ? r[k + e] : 0.0f;
    return make_float4(v[0], v[1], v[2], v[3]);
  }
}

__device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  return fmaf(a.w, b.w, acc);
}

// Sums v[0 .. N) over the warp's lanes, N a multiple of 32: each step hands half of a lane's
// values to its partner, so the warp makes N - N / 32 shuffles instead of 5 N. Afterwards lane
// l holds the sums of values l * (N / 32) + j in v[j], j < N / 32.
template <int N>
__device__ __forceinline__ void warp_sum_many(float (&v)[N], int lane) {
  static_assert(N % 32 == 0);
  int n = N;
#pragma unroll
  for (int off = 16; off >= 1; off >>= 1) {
    n /= 2;
    const bool upper = (lane & off) != 0;
#pragma unroll
    for (int j = 0; j < N / 2; ++j) {
      if (j >= n) break;
      const float send = upper ? v[j] : v[j + n];
      const float keep = upper ? v[j + n] : v[j];
      v[j] = keep + __shfl_xor_sync(0xffffffffu, send, off);
    }
  }
}

// tmp[row, i0 + i] = sum_k a[slot, i0 + i, k] * x[row, k] for the tile's rows and i < kRanks.
template <bool kBf16, int kRanks>
__global__ void __launch_bounds__(kThreads) lora_shrink_kernel(const void* x, int64_t K, const float* a, int64_t R,
                                                               const LoraTile* tiles, const int32_t* tile_rows,
                                                               float* tmp, bool vec_x, bool vec_a) {
  constexpr int kSums = kLoraTileRows * kRanks;  // (row, rank) pairs, row-major
  constexpr int kPad = kSums < 32 ? 32 : kSums;  // what warp_sum_many takes
  __shared__ int32_t rs[kLoraTileRows];
  __shared__ float part[kWarps][kPad];
  const LoraTile tile = tiles[blockIdx.x];  // the plan: written before the step
  if (tile.count == 0) return;
  const int t = static_cast<int>(threadIdx.x), lane = t & 31, warp = t >> 5;
  if (t < kLoraTileRows) rs[t] = t < tile.count ? tile_rows[tile.first + t] : -1;
  const int64_t i0 = int64_t{blockIdx.y} * kRanks;
  const float* arow[kRanks];
#pragma unroll
  for (int i = 0; i < kRanks; ++i) arow[i] = a + (int64_t{tile.slot} * R + (i0 + i < R ? i0 + i : R - 1)) * K;
  // The first pass's A values: the pool is not written by the step's kernels.
  float4 av[kRanks];
  const int64_t k_first = 4 * int64_t{t};
#pragma unroll
  for (int i = 0; i < kRanks; ++i) av[i] = load4(arow[i], k_first, K, vec_a);
  wait_for_previous_kernel();  // x is the previous kernels' result
  __syncthreads();             // rs
  float acc[kPad];
#pragma unroll
  for (int s = 0; s < kPad; ++s) acc[s] = 0.0f;
  for (int64_t k = k_first; k < K; k += 4 * kThreads) {
    // The next pass's A values are requested before this pass's x, so a pass waits on the L2
    // (x) and not on the pool's DRAM.
    float4 an[kRanks];
#pragma unroll
    for (int i = 0; i < kRanks; ++i) an[i] = load4(arow[i], k + 4 * kThreads, K, vec_a);
#pragma unroll
    for (int r = 0; r < kLoraTileRows; ++r) {
      if (r >= tile.count) break;
      const void* xr = static_cast<const char*>(x) + int64_t{rs[r]} * K * (kBf16 ? 2 : 4);
      const float4 xv = load4_act<kBf16>(xr, k, K, vec_x);
#pragma unroll
      for (int i = 0; i < kRanks; ++i) acc[r * kRanks + i] = dot4(av[i], xv, acc[r * kRanks + i]);
    }
#pragma unroll
    for (int i = 0; i < kRanks; ++i) av[i] = an[i];
  }
  // The block's sum of each (row, rank): within warps, then over them in warp order.
  warp_sum_many<kPad>(acc, lane);
#pragma unroll
  for (int j = 0; j < kPad / 32; ++j) part[warp][lane * (kPad / 32) + j] = acc[j];
  __syncthreads();
  if (t < kSums) {
    const int r = t / kRanks, i = t % kRanks;
    if (r < tile.count && i0 + i < R) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += part[w][t];
      tmp[int64_t{rs[r]} * R + i0 + i] = sum;
    }
  }
}

// Ranks [i0, i0 + kRankChunk) of a B row (the missing ones 0).
__device__ __forceinline__ void load_b_chunk(const float* w, int64_t i0, int64_t R, bool vec, float (&wv)[kRankChunk]) {
#pragma unroll
  for (int q = 0; q < kRankChunk / 4; ++q) {
    const float4 v = load4(w, i0 + 4 * q, R, vec);
    wv[4 * q] = v.x;
    wv[4 * q + 1] = v.y;
    wv[4 * q + 2] = v.z;
    wv[4 * q + 3] = v.w;
  }
}

// The expand's launch table (ops::LoraExpandTargets with the grid laid out): target m owns the
// column blocks [first_block, next one's first_block) of the grid's y dimension.
struct ExpandTarget {
  const float* tmp;
  const float* b;
  float* out;
  int64_t R, N, ld;
  int32_t first_block;
  int32_t vec_b;  // b's rows 16-byte aligned and R a multiple of 4
};
struct ExpandTable {
  ExpandTarget m[kLoraExpandMaxTargets];
  int32_t count;
  int64_t ld_tmp;
};

// At least 4 blocks an SM: the table's fields held in registers would otherwise take the kernel
// from the 64 registers the expand of one projection used to 76 (3 blocks an SM); capped, it
// keeps 64 without spilling (ptxas -v, sm_90a).
__global__ void __launch_bounds__(kThreads, 4)
    lora_expand_kernel(const ExpandTable g, const LoraTile* tiles, const int32_t* tile_rows) {
  extern __shared__ float ts[];  // [kLoraTileRows, R]: the tile's rank vectors, then kRankChunk zeros
  __shared__ int32_t rs[kLoraTileRows];
  const LoraTile tile = tiles[blockIdx.x];  // the plan: written before the step
  if (tile.count == 0) return;
  // The block's target: the last one whose blocks start at or before blockIdx.y (a few
  // compares of kernel parameters: the table holds at most four).
  ExpandTarget m = g.m[0];
#pragma unroll
  for (int i = 1; i < kLoraExpandMaxTargets; ++i)
    if (i < g.count && static_cast<int32_t>(blockIdx.y) >= g.m[i].first_block) m = g.m[i];
  const int64_t R = m.R, N = m.N;
  const int t = static_cast<int>(threadIdx.x);
  if (t < kLoraTileRows) rs[t] = t < tile.count ? tile_rows[tile.first + t] : -1;
  const int64_t j = int64_t{static_cast<int32_t>(blockIdx.y) - m.first_block} * kThreads + t;
  const bool col = j < N;
  const float* w = m.b + (int64_t{tile.slot} * N + (col ? j : N - 1)) * R;
  float wv[kRankChunk];
  load_b_chunk(w, 0, R, m.vec_b != 0, wv);  // the pool is not written by the step's kernels
  wait_for_previous_kernel();                // tmp and out are the previous kernels' results
  __syncthreads();                           // rs
  // tmp's rows are ld_tmp apart: the target's ranks are a column range of a shrink output
  // shared with the other projections of its input.
  for (int64_t e = t; e < int64_t{tile.count} * R; e += kThreads) ts[e] = m.tmp[int64_t{rs[e / R]} * g.ld_tmp + e % R];
  // A chunk past R multiplies zero B values by what follows a row: the next row's values, or
  // past the last row these zeros (never uninitialised memory, which may hold a NaN).
  if (t < kRankChunk) ts[int64_t{tile.count} * R + t] = 0.0f;
  float o[kLoraTileRows];
#pragma unroll
  for (int r = 0; r < kLoraTileRows; ++r) o[r] = col && r < tile.count ? m.out[int64_t{rs[r]} * m.ld + j] : 0.0f;
  __syncthreads();  // ts
  float acc[kLoraTileRows];
#pragma unroll
  for (int r = 0; r < kLoraTileRows; ++r) acc[r] = 0.0f;
  for (int64_t c = 0; c < R; c += kRankChunk) {
    if (c > 0) load_b_chunk(w, c, R, m.vec_b != 0, wv);
#pragma unroll
    for (int r = 0; r < kLoraTileRows; ++r) {
      if (r >= tile.count) break;
      const float* tr = ts + int64_t{r} * R + c;
#pragma unroll
      for (int i = 0; i < kRankChunk; ++i)
        acc[r] = fmaf(wv[i], tr[i], acc[r]);
    }
  }
  if (!col) return;
#pragma unroll
  for (int r = 0; r < kLoraTileRows; ++r)
    if (r < tile.count) m.out[int64_t{rs[r]} * m.ld + j] = o[r] + acc[r];
}

size_t expand_shared(int64_t R) {
  return (static_cast<size_t>(kLoraTileRows) * static_cast<size_t>(R) + kRankChunk) * sizeof(float);
}

template <bool kBf16, int kRanks>
void launch_shrink(const void* x, int64_t K, const float* a, int64_t R, const LoraTile* tiles, int32_t n_tiles,
                   const int32_t* tile_rows, float* tmp, Stream stream) {
  const int64_t blocks_y = (R + kRanks - 1) / kRanks;
  if (blocks_y > 65535) throw std::invalid_argument("cuda backend: lora_shrink: rank too large");
  launch_dependent("lora_shrink_kernel", lora_shrink_kernel<kBf16, kRanks>,
                   dim3(static_cast<unsigned>(n_tiles), static_cast<unsigned>(blocks_y)), dim3(kThreads), 0, stream, x,
                   K, a, R, tiles, tile_rows, tmp, K % 4 == 0 && aligned_to(x, kBf16 ? 8 : 16),
                   K % 4 == 0 && aligned_to(a, 16));
}

template <bool kBf16>
void shrink_for(const void* x, int64_t rows, int64_t K, const float* a, int64_t R, const LoraTile* tiles,
                int32_t n_tiles, const int32_t* tile_rows, float* tmp, Stream stream) {
  if (rows <= kShrinkOneRankRows)
    launch_shrink<kBf16, 1>(x, K, a, R, tiles, n_tiles, tile_rows, tmp, stream);
  else
    launch_shrink<kBf16, 4>(x, K, a, R, tiles, n_tiles, tile_rows, tmp, stream);
}

}  // namespace

void lora_shrink(const void* x, DType x_type, int64_t rows, int64_t K, const float* a, int64_t R, const LoraTile* tiles,
                 int32_t n_tiles, const int32_t* tile_rows, float* tmp, Stream stream) {
  if (n_tiles == 0 || R == 0) return;
  if (x_type == DType::bf16)
    shrink_for<true>(x, rows, K, a, R, tiles, n_tiles, tile_rows, tmp, stream);
  else
    shrink_for<false>(x, rows, K, a, R, tiles, n_tiles, tile_rows, tmp, stream);
}

void lora_expand(const LoraExpandTargets& targets, const LoraTile* tiles, int32_t n_tiles, const int32_t* tile_rows,
                 Stream stream) {
  if (targets.count > kLoraExpandMaxTargets) throw std::invalid_argument("cuda backend: lora_expand: too many targets");
  if (n_tiles == 0) return;
  ExpandTable g{};
  g.ld_tmp = targets.ld_tmp;
  int64_t blocks_y = 0;
  size_t shared = 0;
  for (int i = 0; i < targets.count; ++i) {
    const LoraExpandTargets::Target& t = targets.t[i];
    if (t.N == 0 || t.R == 0) continue;
    if (targets.ld_tmp < t.R) throw std::invalid_argument("cuda backend: lora_expand: tmp rows narrower than the rank");
    g.m[g.count++] = ExpandTarget{t.tmp, t.b, t.out, t.R, t.N, t.ld, static_cast<int32_t>(blocks_y),
                                  t.R % 4 == 0 && aligned_to(t.b, 16)};
    blocks_y += (t.N + kThreads - 1) / kThreads;
    shared = std::max(shared, expand_shared(t.R));
    if (blocks_y > 65535) throw std::invalid_argument("cuda backend: lora_expand too large");
  }
  if (g.count == 0) return;
  if (shared > kLoraExpandMaxShared) throw std::invalid_argument("cuda backend: lora_expand too large");
  // The limit is raised to what this launch takes (once per device and size): asking for the
  // whole opt-in ceiling fails, as the kernel's static shared memory counts against it.
  if (shared > 48 * 1024) detail::ensure_smem_limit(reinterpret_cast<const void*>(lora_expand_kernel), static_cast<int64_t>(shared));
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(blocks_y));
  launch_dependent("lora_expand_kernel", lora_expand_kernel, grid, dim3(kThreads), shared, stream, g, tiles, tile_rows);
}

}  // namespace ds::cuda::ops
