// Tile loads of the tensor-core decode kernel (decode_tc.cuh): the block-table lookups and
// the copies of 16-token K/V tiles into a stage of shared memory.
//
// Per-head blocks (TcHeadLoads): each warp streams its own tiles (w, w+4, w+8, ... of the
// chunk) through S stages of its own. Quantised K and V with 16-byte-multiple rows (head_dim
// 256) come by bulk tensor copies on sm_90, one box per operand and tile issued by lane 0 on
// the stage's mbarrier (tma_copy.cuh); otherwise by cp.async of 16-byte granules (8 for 136-
// and 72-byte quantised rows), zero-filled past the chunk end so no NaN from unused slots
// reaches the products. bf16/f16 tiles are XOR-swizzled for conflict-free ldmatrix. The block
// ids of a stage are fetched one iteration early so table latency stays hidden; row offsets
// are 64-bit.
//
// Token-row tiles (TcTokenRowLoads, sm_90): the four warps share the stages, each the chunk's next
// 16 whole token rows of every head, one bulk copy per operand issued by thread 0 after the
// four warps have released the stage (its "empty" barrier); every warp waits on the stage's
// "full" one. NVIDIA sm_80+ only.
#pragma once

#include <cstdint>

#include "kernels/cuda/decode_tc_tile.cuh"
#include "kernels/cuda/tma_copy.cuh"

namespace ds::cuda::detail {

// Copies 16 rows of RB bytes into shared memory at dst by cp.async of CH-byte granules: row r
// from row index shfl(myrow, r) of the pool (lanes 0..15 hold the tile's row indices), zeros
// for a negative index; SWIZZLE XORs the granule index with the row (bf16/f16 tiles, for
// conflict-free ldmatrix).
template <int RB, int CH, bool SWIZZLE>
__device__ __forceinline__ void tc_copy_rows(uint8_t* dst, const uint8_t* pool, int64_t myrow, int lane) {
  constexpr int NC = RB / CH;  // granules per row
#pragma unroll
  for (int it = 0; it < (16 * NC + 31) / 32; ++it) {
    const int c = lane + 32 * it;
    const bool ok = c < 16 * NC;
    const int row = ok ? c / NC : 0;
    const int col = c - row * NC;
    const int64_t ri = __shfl_sync(0xffffffffu, myrow, row);
    if (ok) {
      const int pcol = SWIZZLE ? (col ^ (row & 7)) : col;
      cp_async<CH>(smem_addr(dst + row * RB + pcol * CH), pool + (ri >= 0 ? ri * RB : 0) + col * CH, ri >= 0 ? CH : 0);
    }
  }
}

// Block id of token `j` of a tile, fetched ahead of its use.
struct TcTileMeta {
  int32_t blk, tok, page;
  bool valid;
};

template <DType KT, DType VT, int D, bool kTma>
struct TcHeadLoads {
  using Sh = TcShape<KT, VT, D>;
  const DecodeArgs& a;
  const ItemRange& r;
  const TcMaps& maps;
  const int32_t* trow;  // the sequence's block ids
  uint8_t* wbase;       // the warp's stages
  uint32_t bars;        // the warp's stage barriers (bulk copies)
  int kvh, lane, warp, n_my;
  bool tma;  // this launch copies by bulk tensor copies

  __device__ __forceinline__ int tile_base(int i) const { return r.t0 + 16 * (warp + kTcWarps * i); }
  __device__ __forceinline__ TcTileMeta fetch_for(int i, int j, bool want) const {
    TcTileMeta m;
    m.tok = tile_base(i) + j;
    m.valid = want && i < n_my && m.tok < r.t1;
    m.page = m.valid ? page_of(a, m.tok) : 0;
    m.blk = m.valid ? __ldg(trow + m.page) : 0;
    return m;
  }
  // Lanes 0..15: the block id of token `lane` of the warp's tile i.
  __device__ __forceinline__ TcTileMeta fetch(int i) const { return fetch_for(i, lane, lane < 16); }
  // The cp.async path's row index of this lane's token; with bulk copies, the token row (of
  // lane 0's token, the tile's first).
  __device__ __forceinline__ int64_t to_row(const TcTileMeta& m) const {
    if (!m.valid) return -1;
    return tma ? kv_token_row(a, m.blk, m.tok, m.page) : kv_row(a, m.blk, m.tok, m.page, kvh);
  }

  // Copies the warp's tile i into stage st; myrow: to_row of this lane's token.
  __device__ __forceinline__ void issue(int i, int st, int64_t myrow) const {
    if constexpr (kTma) {
      if (tma) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        if (lane == 0 && i < n_my) {
          const uint32_t bar = bars + 8 * st, kst = smem_addr(wbase + st * Sh::STG);
          // A refused block id reads a box past the tensor, which arrives as zeros.
          const int32_t row = myrow >= 0 ? static_cast<int32_t>(myrow) : 0x7fffffff - 16;
          mbar_arrive_expect_tx(bar, Sh::STG);
          tma_load_3d(kst, maps.k, bar, 0, kvh, row);
          tma_load_3d(kst + 16 * Sh::RK, maps.v, bar, 0, kvh, row);
        }
#endif
        return;
      }
    }
    if (i < n_my) {
      uint8_t* kst = wbase + st * Sh::STG;
      tc_copy_rows<Sh::RK, Sh::CHK, !Sh::KQ>(kst, a.k_pool, myrow, lane);
      tc_copy_rows<Sh::RV, Sh::CHV, !Sh::VQ>(kst + 16 * Sh::RK, a.v_pool, myrow, lane);
    }
    cp_async_commit();
  }
};

template <DType KT, DType VT, int D>
struct TcTokenRowLoads {
  using Sh = TcShape<KT, VT, D>;
  const DecodeArgs& a;
  const ItemRange& r;
  const TcMaps& maps;
  const int32_t* trow;  // the sequence's block ids
  uint8_t* smem;
  uint32_t full, empty;  // per stage: the tile has landed / every warp has released it
  int* stage_valid;      // per stage: usable token rows
  int n_tiles;

  __device__ __forceinline__ int tile_base(int i) const { return r.t0 + 16 * i; }
  // Token row of tile i's first token; -1 when the guard refuses its block id.
  __device__ __forceinline__ int64_t tile_row(int i) const {
    const int32_t tok = tile_base(i);
    const int32_t page = page_of(a, tok);
    return kv_token_row(a, __ldg(trow + page), tok, page);
  }
  // Copies tile j (16 token rows of every head, from token row trow_index) into stage j % S.
  __device__ __forceinline__ void issue(int j, int64_t trow_index) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const int st = j % a.stages;
    // A refused block id copies the pool's first rows and counts no usable row.
    stage_valid[st] = trow_index < 0 ? 0 : min(16, r.t1 - tile_base(j));
    const int32_t row = trow_index < 0 ? 0 : static_cast<int32_t>(trow_index);
    constexpr uint32_t KB = 16 * kTcWarps * Sh::RK, VB = 16 * kTcWarps * Sh::RV;
    const uint32_t dst = smem_addr(smem + st * Sh::STGR), bar = full + 8 * st;
    mbar_arrive_expect_tx(bar, KB + VB);
    tma_load_3d(dst, maps.k, bar, 0, row, 0);
    tma_load_3d(dst + KB, maps.v, bar, 0, row, 0);
#else
    (void)j, (void)trow_index;
#endif
  }
};

}  // namespace ds::cuda::detail
