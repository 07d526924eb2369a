// Tensor-core paged decode kernels (NVIDIA sm_80+; tuned for the H200), composed of the
// parts in decode_tc_q.cuh (q), decode_tc_loads.cuh (tiles), decode_tc_tile.cuh (one tile's
// maths) and decode_tc_epilogue.cuh (the write).
//
// decode_tc_heads_kernel: grid x = (KV head, chunk of up to 8 query heads), y = work item
// (sequence chunk). Block: 4 warps, each an independent pipeline over its own 16-token tiles
// of the chunk (tile w, w+4, w+8, ...), so no barrier is needed until the final merge of the
// four warps.
// decode_tc_token_rows_kernel (token-row tiles; quantised K and V at head_dim 256, 4 KV heads,
// sm_90; the planner picks them for long chunks): grid x = 1, warp w computes KV head w over
// every tile of the chunk, and the four warps share the stages, each the chunk's next 16
// whole token rows of the pool.
//
// Start-up: q of the block's heads is the first cp.async group, issued before the block-table
// lookups; then stages 0..S-2 are in flight before the first tile is consumed. Softmax is
// online in base 2.
//
// TRACE instantiations (decode_trace.h, for the benchmark and the tests) stamp each block's
// phases into DecodeArgs::trace (decode_launch.h, kTraceWords); production instantiations
// carry no stamp code.
#pragma once

#include <cstdint>

#include "kernels/cuda/decode_common.cuh"
#include "kernels/cuda/decode_tc_layout.h"

#if DS_GPU_HAS_MMA_SM80
#include "kernels/cuda/decode_tc_epilogue.cuh"
#include "kernels/cuda/decode_tc_loads.cuh"
#endif

namespace ds::cuda::detail {

#if DS_GPU_HAS_MMA_SM80

// Thread 0's phase stamps in traced instantiations; nothing otherwise.
template <bool ON>
struct TcTrace {
  uint64_t* t = nullptr;
  __device__ __forceinline__ void begin(const DecodeArgs& a) {
    if constexpr (ON) {
      if (a.trace && threadIdx.x == 0) {
        t = a.trace + kTraceWords * (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x);
        t[0] = global_timer_ns();
        t[1] = smid();
        t[2] = clock64();
      }
    }
  }
  __device__ __forceinline__ void stamp(int i) {
    if constexpr (ON)
      if (t) t[i] = clock64();
  }
  // clock64 once `dep` has arrived.
  __device__ __forceinline__ void stamp_after(int i, uint32_t dep) {
    if constexpr (ON)
      if (t) t[i] = clock_after(dep);
  }
  __device__ __forceinline__ void end(int ntok) {
    if constexpr (ON)
      if (t) trace_end(t, ntok);
  }
};

#endif  // DS_GPU_HAS_MMA_SM80

template <DType KT, DType VT, int D, bool TRACE>
__global__ void __launch_bounds__(kTcWarps * 32, tc_min_blocks(KT, VT, D))
    decode_tc_heads_kernel(const DecodeArgs a, const DS_GRID_CONSTANT TcMaps maps) {
#if DS_GPU_HAS_MMA_SM80 && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  using Sh = TcShape<KT, VT, D>;
#if __CUDA_ARCH__ >= 900
  constexpr bool kTma = tc_tma_capable(KT, VT, D);
  // The tensor maps are kernel parameters: their fetch can start before the previous kernel ends.
  if constexpr (kTma) {
    if (threadIdx.x == 0 && a.tma) {
      tma_prefetch_map(&maps.k);
      tma_prefetch_map(&maps.v);
    }
  }
#else
  constexpr bool kTma = false;
#endif
  DS_GPU_WAIT_PREVIOUS();  // chained launches (DecodeOptions::chained_launch): q and the new K/V rows
  TcTrace<TRACE> tr;
  tr.begin(a);
  extern __shared__ __align__(128) uint8_t smem[];
  const TcLane L = tc_lane();
  const int kvh = blockIdx.x / a.head_chunks, hc = blockIdx.x - kvh * a.head_chunks;
  const ItemRange r = item_range(a, blockIdx.y);
  const int ntok = max(r.t1 - r.t0, 0);
  tr.stamp_after(8, static_cast<uint32_t>(r.t1));
  const int heads_here = min(kTcHeads, a.group - hc * kTcHeads);
  const int first_head = kvh * a.group + hc * kTcHeads;

  // q (the first cp.async group), then the barriers of the warp's stages (bulk copies).
  const int S = a.stages;
  uint8_t* const qs = smem + tc_q_offset(int64_t{kTcWarps} * S * Sh::STG, D);
  const bool tma = kTma && a.tma;
  const uint32_t bars = smem_addr(qs + tc_q_bytes(D)) + L.warp * 64;
  tc_copy_q<D>(a, r.seq, first_head, heads_here, qs, [](int h) { return h; });

  TcQuery<KT, D> q;
  TcAccum<D> ac;
  ac.init();
  const int total_tiles = (ntok + 15) >> 4;
  const int n_my = total_tiles > L.warp ? (total_tiles - L.warp + kTcWarps - 1) / kTcWarps : 0;
  const TcHeadLoads<KT, VT, D, kTma> ld{a, r, maps, a.table + static_cast<int64_t>(r.seq) * a.table_stride,
                                        smem + L.warp * S * Sh::STG, bars, kvh, L.lane, L.warp, n_my, tma};
#if __CUDA_ARCH__ >= 900
  if constexpr (kTma) {
    if (tma) {
      if (L.lane == 0) {
        for (int st = 0; st < S; ++st) mbar_init(bars + 8 * st, 1);
        mbar_fence_init();
      }
      __syncwarp();
    }
  }
#endif
  // Stages 0..S-2 in flight before the first tile is consumed. Lanes 16..31 look up the block
  // ids of the second stage of each pair, so the table is read in ceil((S-1)/2) round trips.
  for (int st = 0; st < S - 1; st += 2) {
    const int mine = st + (L.lane >> 4);
    const int64_t row = ld.to_row(ld.fetch_for(mine, L.lane & 15, mine < S - 1));
    const int64_t row2 = __shfl_down_sync(0xffffffffu, row, 16);
    if (st == 0) tr.stamp_after(9, static_cast<uint32_t>(row));
    ld.issue(st, st, row);
    if (st + 1 < S - 1) ld.issue(st + 1, st + 1, row2);
  }
  tr.stamp(12);
  TcTileMeta pend = ld.fetch(S - 1);
  // q has landed once at most the S - 1 tile groups issued after it are pending (with bulk
  // copies it is the only group); the other warps' parts of it are visible after the barrier.
  if (tma)
    cp_async_wait<0>();
  else
    cp_async_wait_dyn(S - 1);
  __syncthreads();
  tr.stamp(14);
  tc_build_q(a, qs, heads_here, L, q);
  tr.stamp_after(10, q.last());

  int st_load = S - 1, st_use = 0;
  uint32_t parity = 0;  // of the barriers' phase the next wait on stage st_use completes
  for (int i = 0; i < n_my; ++i) {
    if constexpr (kTma) {
#if __CUDA_ARCH__ >= 900
      if (tma)
        mbar_wait(bars + 8 * st_use, parity);
      else
        cp_async_wait_dyn(S - 2);
#endif
    } else {
      cp_async_wait_dyn(S - 2);
    }
    __syncwarp();
    if (i < 2) tr.stamp(i == 0 ? 3 : 13);
    ld.issue(i + S - 1, st_load, ld.to_row(pend));
    pend = ld.fetch(i + S);
    uint8_t* const kst = ld.wbase + st_use * Sh::STG;
    if constexpr (kTma) {
      // A box that ends past the chunk brought the block's later rows.
      const int valid = r.t1 - ld.tile_base(i);
      if (tma && valid < 16) tc_zero_v_scales<VT, D>(kst + 16 * Sh::RK, valid, L.lane);
    }
    tc_tile<KT, VT, D>(kst, kst + 16 * Sh::RK, Sh::RK, Sh::RV, min(16, r.t1 - ld.tile_base(i)), q, ac, L);
    __syncwarp();
    st_load = st_load + 1 == S ? 0 : st_load + 1;
    st_use = st_use + 1 == S ? 0 : st_use + 1;
    parity ^= st_use == 0 ? 1u : 0u;
  }
  cp_async_wait<0>();
  tr.stamp(4);
  // The merge kernel (launched with programmatic stream serialization) may start its launch
  // now; it waits for this grid's results before reading them.
  DS_GPU_ALLOW_NEXT();
  tc_reduce_sums(ac);
  tr.stamp_after(11, __float_as_uint(ac.l0 + ac.l1));
  tc_write_heads<VT, D>(a, r, smem, ac, L, first_head, heads_here);
  tr.end(ntok);
#endif
}

template <DType KT, DType VT, int D, bool TRACE>
__global__ void __launch_bounds__(kTcWarps * 32, tc_min_blocks(KT, VT, D))
    decode_tc_token_rows_kernel(const DecodeArgs a, const DS_GRID_CONSTANT TcMaps maps) {
#if DS_GPU_HAS_MMA_SM80 && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  static_assert(tc_token_rows_capable(KT, VT, D), "token-row tiles need quantised K and V with 16-byte rows");
  using Sh = TcShape<KT, VT, D>;
  // The tensor maps are kernel parameters: their fetch can start before the previous kernel ends.
  if (threadIdx.x == 0) {
    tma_prefetch_map(&maps.k);
    tma_prefetch_map(&maps.v);
  }
  DS_GPU_WAIT_PREVIOUS();  // chained launches (DecodeOptions::chained_launch): q and the new K/V rows
  TcTrace<TRACE> tr;
  tr.begin(a);
  extern __shared__ __align__(128) uint8_t smem[];
  const TcLane L = tc_lane();
  const int kvh = L.warp;  // warp w computes KV head w
  const ItemRange r = item_range(a, blockIdx.y);
  const int ntok = max(r.t1 - r.t0, 0);
  tr.stamp_after(8, static_cast<uint32_t>(r.t1));
  const int heads_here = min(kTcHeads, a.group);

  // q of every warp's heads ([warps][8] rows) in the last stage's buffer: head h to slot
  // (h / group) * 8 + h % group; then the barriers: "full" and "empty" per stage and after
  // them each stage's count of usable token rows.
  const int S = a.stages;
  uint8_t* const qs = smem + (S - 1) * Sh::STGR;
  uint8_t* const bar_area = smem + (tc_token_rows_smem_bytes(Sh::STGR, S, D) - tc_bar_bytes());
  const uint32_t bars = smem_addr(bar_area);
  const int group = a.group;
  tc_copy_q<D>(a, r.seq, 0, kTcWarps * group, qs, [group](int h) { return (h / group) * kTcHeads + h % group; });

  TcQuery<KT, D> q;
  TcAccum<D> ac;
  ac.init();
  const int n_tiles = (ntok + 15) >> 4;
  const TcTokenRowLoads<KT, VT, D> ld{a,    r,         maps, a.table + static_cast<int64_t>(r.seq) * a.table_stride,
                                 smem, bars,      bars + 64, reinterpret_cast<int*>(bar_area + 128),
                                 n_tiles};
  int64_t pend_row = -1;  // warp 0, lane 0: tile_row of the next tile to issue
  if (threadIdx.x == 0) {
    for (int st = 0; st < S; ++st) {
      mbar_init(ld.full + 8 * st, 1);
      mbar_init(ld.empty + 8 * st, kTcWarps);
    }
    mbar_fence_init();
  }
  // Warp 0's lanes 0..S-2 fill the first stages.
  if (L.warp == 0) {
    __syncwarp();
    if (L.lane < S - 1 && L.lane < n_tiles) ld.issue(L.lane, ld.tile_row(L.lane));
    if (L.lane == 0 && S - 1 < n_tiles) pend_row = ld.tile_row(S - 1);
    tr.stamp_after(9, static_cast<uint32_t>(pend_row));
  }
  tr.stamp(12);
  cp_async_wait<0>();  // q
  __syncthreads();
  tr.stamp(14);
  tc_build_q(a, qs + L.warp * tc_q_bytes(D), heads_here, L, q);
  tr.stamp_after(10, q.last());

  int st_use = 0;
  uint32_t parity = 0;  // of the barriers' phase the next wait on stage st_use completes
  __syncthreads();      // q's area (the last stage) is refilled once every warp holds its q
  for (int i = 0; i < n_tiles; ++i) {
    if (threadIdx.x == 0) {
      const int j = i + S - 1;
      if (j < n_tiles) {
        if (j >= S) mbar_wait(ld.empty + 8 * (j % S), static_cast<uint32_t>((j / S - 1) & 1));
        ld.issue(j, pend_row);
        if (j + 1 < n_tiles) pend_row = ld.tile_row(j + 1);
      }
    }
    __syncwarp();
    mbar_wait(ld.full + 8 * st_use, parity);
    if (i < 2) tr.stamp(i == 0 ? 3 : 13);
    uint8_t* kst = smem + st_use * Sh::STGR + L.warp * 16 * Sh::RK;
    uint8_t* vst = smem + st_use * Sh::STGR + 16 * kTcWarps * Sh::RK + L.warp * 16 * Sh::RV;
    const int valid = ld.stage_valid[st_use];
    if (valid < 16) tc_zero_v_scales<VT, D>(vst, valid, L.lane);  // rows past the sequence or a refused block
    tc_tile<KT, VT, D>(kst, vst, Sh::RK, Sh::RV, valid, q, ac, L);
    __syncwarp();
    if (L.lane == 0) mbar_arrive(ld.empty + 8 * st_use);
    st_use = st_use + 1 == S ? 0 : st_use + 1;
    parity ^= st_use == 0 ? 1u : 0u;
  }
  cp_async_wait<0>();
  tr.stamp(4);
  DS_GPU_ALLOW_NEXT();  // see decode_tc_heads_kernel
  tc_reduce_sums(ac);
  tr.stamp_after(11, __float_as_uint(ac.l0 + ac.l1));
  tc_write_token_rows<VT, D>(a, r, smem, ac, L, kvh * a.group, heads_here);
  tr.end(ntok);
#endif
}

}  // namespace ds::cuda::detail
