// Tensor-core paged decode kernel (NVIDIA sm_80+; tuned for the H200).
//
// Grid: x = (KV head, chunk of up to 8 query heads), y = work item (sequence chunk). Block:
// 4 warps, each an independent pipeline over its own 16-token tiles of the chunk (tile w,
// w+4, w+8, ...), so no barrier is needed until the final merge of the four warps.
// Token-row tiles (the ROWS instantiation; quantised K and V at head_dim 256, 4 KV heads,
// sm_90; the planner picks them for long chunks): grid x = 1, warp w computes KV head w over
// every tile of the chunk, and the four warps share the stages, each the chunk's next 16
// whole token rows of the pool (tc_rows_capable below).
//
// Per 16-token tile a warp computes S^T = K Q^T and O^T += V^T P^T with mma.m16n8k16:
// tokens (for QK) and head_dim (for PV) fill the 16-row side, the group's query heads the
// 8-column side, so a GQA group of up to 8 heads costs one tile and every K/V row is loaded
// once. The probabilities leave the QK accumulators in the wrong layout for the PV operand;
// movmatrix transposes them in registers (as fp32, high and low halves separately).
//
// Precision: q (pre-scaled by scale*log2 e) and P are split into hi + lo parts of the
// operand type and multiplied twice, so products carry ~16 (bf16) or ~22 (f16) significant
// bits into fp32 accumulators. Quantised K goes through the int8 tensor cores with q as two
// int8 digits (~15 bits of q; exact int32 per 32-element block, times the block's scale);
// quantised V enters as exact f16 integers with its block scale applied to P's hi/lo pair
// (decode_tc_quant.cuh). Softmax is online in base 2.
//
// Start-up: q of the block's heads is the first cp.async group, issued before the block-table
// lookups, and is read from shared memory once it lands (loaded into registers element by
// element it cost ~10 us per block); the block's phases can be stamped (DecodeOptions::trace).
// Loads, S stages deep per warp: quantised K and V with 16-byte-multiple rows (head_dim 256)
// by bulk tensor copies on sm_90, one box per operand and tile issued by lane 0 on the stage's
// mbarrier (tma_copy.cuh; the box's rows past the chunk have their V scales zeroed);
// otherwise cp.async of 16-byte chunks (8 for 136- and 72-byte quantised rows), zero-filled
// past the chunk end so no NaN from unused slots reaches the products. The block ids of the
// next stage are fetched one iteration early so table latency stays hidden; row offsets are
// 64-bit. bf16/f16 tiles are XOR-swizzled for conflict-free ldmatrix; quantised tiles are raw
// ggml rows, and each lane reads the bytes of its own fragment (the head_dim order inside a
// 32-block is permuted to make those bytes contiguous; q and the output use the same
// permutation).
#pragma once

#include <type_traits>

#include "kernels/cuda/decode_common.cuh"

#if DS_GPU_HAS_MMA_SM80
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/decode_tc_quant.cuh"
#include "kernels/cuda/tma_copy.cuh"
#endif

namespace ds::cuda::detail {

constexpr int tc_row_bytes(DType t, int D) { return static_cast<int>(row_bytes(t, D)); }
constexpr int tc_chunk_bytes(int rb) { return rb % 16 == 0 ? 16 : 8; }
// Shared memory of one stage of one warp: 16 K rows + 16 V rows.
constexpr int tc_warp_stage_bytes(DType k, DType v, int D) { return 16 * (tc_row_bytes(k, D) + tc_row_bytes(v, D)); }
// The final cross-warp merge, over the pipeline's buffers.
// Maxima and sums [warps][8] each, the heads' log-sum-exps [8], then the rows [warps][8][D + 4].
constexpr int tc_merge_o_offset() { return ((2 * kTcWarps * kTcHeads + kTcHeads) * 4 + 15) / 16 * 16; }
constexpr int tc_merge_bytes(int D) { return tc_merge_o_offset() + kTcWarps * kTcHeads * (D + 4) * 4; }
// q of the block's heads, copied in as the first cp.async group and read from there: one row
// of up to D fp32 per head, padded by 16 bytes so the eight heads' rows start in different banks.
constexpr int tc_q_row_bytes(int D) { return 4 * D + 16; }
constexpr int tc_q_bytes(int D) { return kTcHeads * tc_q_row_bytes(D); }
// Byte offset of the q area: after the pipeline stages (or the merge area, when larger).
constexpr int64_t tc_q_offset(int64_t stage_bytes_all, int D) {
  const int64_t m = stage_bytes_all > tc_merge_bytes(D) ? stage_bytes_all : tc_merge_bytes(D);
  return (m + 127) / 128 * 128;
}
// After q: one 8-byte barrier per warp and stage (up to 8 stages) for bulk tile copies.
constexpr int tc_bar_bytes() { return kTcWarps * 8 * 8; }
// Bulk tensor copies serve both operands when both rows are whole 16-byte units (quantised
// K and V at head_dim 256; bf16/f16 tiles need the XOR swizzle of the cp.async path).
constexpr bool tc_tma_capable(DType k, DType v, int D) {
  return is_quantized(k) && is_quantized(v) && row_bytes(k, D) % 16 == 0 && row_bytes(v, D) % 16 == 0;
}
// Token-row tiles (sm_90, quantised K and V at head_dim 256, as many KV heads as warps): one
// block per chunk covers every KV head, warp w computing head w, and each stage is the
// chunk's next 16 whole token rows of the pool (all heads: a contiguous range), one bulk
// tensor copy per operand that lands head by head ([head][16][row], tma_pool_map.h).
// Quantised rows (272 / 144 bytes) do not fill whole 128-byte lines, so a block per head
// reads lines it shares with its neighbours' blocks; whole token rows are contiguous.
constexpr bool tc_rows_capable(DType k, DType v, int D) { return tc_tma_capable(k, v, D); }
// One stage of the token-row pipeline: 16 token rows of K, then of V, all kTcWarps heads.
constexpr int64_t tc_rows_stage_bytes(DType k, DType v, int D) {
  return int64_t{16} * kTcWarps * (row_bytes(k, D) + row_bytes(v, D));
}
// q of every warp's heads ([warps][8] rows) lives in the last stage's buffer, which is first
// filled after q is in registers; it spills past the stages when larger than one stage. The
// output rows ([warps][8][D + 4] fp32, the same size) reuse the same space at the end.
constexpr int64_t tc_rows_q_bytes(int D) { return int64_t{kTcWarps} * tc_q_bytes(D); }
constexpr int64_t tc_rows_smem_bytes(int64_t stage_bytes, int stages, int D) {
  const int64_t last = stage_bytes > tc_rows_q_bytes(D) ? stage_bytes : tc_rows_q_bytes(D);
  return ((stages - 1) * stage_bytes + last + 127) / 128 * 128 + tc_bar_bytes();
}


#if DS_GPU_HAS_MMA_SM80

// Round to nearest (even) of |x| < 2^22 by one FP32 add: x + 1.5 * 2^23 keeps the rounded
// integer in its low mantissa bits. rintf and float-to-int conversions run on the SM's
// quarter-rate unit, and q's two digits per element took them ~2-3 us of every quantised
// block's start-up (all warps of an SM converting at once).
constexpr float kRoundMagic = 12582912.f;
__device__ __forceinline__ float round_magic(float x) { return __fadd_rn(x, kRoundMagic); }
__device__ __forceinline__ int magic_int(float t) { return __float_as_int(t) - 0x4B400000; }

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte copies ask the L2 for whole 128-byte lines (on the H200 this made no measurable
// difference for Q8_0/Q4_0 rows, which straddle lines shared with the next head's row, and
// rows of bf16/f16 are whole lines anyway).
template <int N>
__device__ __forceinline__ void cp_async(uint32_t dst, const void* src, int src_bytes) {
  if constexpr (N == 16)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_dyn(int n) {
  switch (n) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    default: cp_async_wait<7>(); break;
  }
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

template <bool F16>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (F16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// x0, x1 -> hi + lo pairs of the operand type (element 0 in the low half).
template <bool F16>
__device__ __forceinline__ void split_pair(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  if constexpr (F16) {
    const __half2 h = __floats2half2_rn(x0, x1);
    const float2 hf = __half22float2(h);
    const __half2 l = __floats2half2_rn(x0 - hf.x, x1 - hf.y);
    hi = *reinterpret_cast<const uint32_t*>(&h);
    lo = *reinterpret_cast<const uint32_t*>(&l);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
    const float2 hf = __bfloat1622float2(h);
    const __nv_bfloat162 l = __floats2bfloat162_rn(x0 - hf.x, x1 - hf.y);
    hi = *reinterpret_cast<const uint32_t*>(&h);
    lo = *reinterpret_cast<const uint32_t*>(&l);
  }
}

// head_dim index of the k-th column (0..15) of k-step s of the QK product for bf16/f16 K
// (quantised K: q_k_dim in decode_tc_quant.cuh).
__device__ __forceinline__ int k_dim(int s, int kk) { return 16 * s + kk; }
// head_dim index of row rho (0..15) of m-tile i of the PV product (O^T rows).
template <DType VT>
__device__ __forceinline__ int v_dim(int i, int rho) {
  if constexpr (VT == DType::q8_0)
    return 32 * (i >> 1) + 4 * (rho & 7) + 2 * (i & 1) + (rho >> 3);
  else if constexpr (VT == DType::q4_0)
    return 32 * (i >> 1) + 16 * (i & 1) + 2 * (rho & 7) + (rho >> 3);
  else
    return 16 * i + rho;
}

#endif  // DS_GPU_HAS_MMA_SM80

// Resident blocks per SM the register budget is cut for. Q4_0/Q4_0 at head_dim 256 fits 168
// registers without spills and runs three blocks of three stages per SM (decode_tc's
// instructions, not bytes, bound it): 5-7% faster than two blocks of five stages at 32K+ on
// the H200, 4-8% slower at batch 1 / 32K and in the ragged batch (docs/benchmarks.md).
constexpr int tc_min_blocks(DType k, DType v, int D) {
  return k == DType::q4_0 && v == DType::q4_0 && D == 256 ? 3 : 1;
}

template <DType KT, DType VT, int D, bool ROWS>
__global__ void __launch_bounds__(kTcWarps * 32, tc_min_blocks(KT, VT, D)) decode_tc_kernel(const DecodeArgs a, const DS_GRID_CONSTANT TcMaps maps) {
#if DS_GPU_HAS_MMA_SM80 && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
#if __CUDA_ARCH__ >= 900
  // The tensor maps are kernel parameters: their fetch can start before the previous kernel ends.
  if constexpr (tc_tma_capable(KT, VT, D)) {
    if (threadIdx.x == 0 && (ROWS || a.tma)) {
      tma_prefetch_map(&maps.k);
      tma_prefetch_map(&maps.v);
    }
  }
#endif
  DS_GPU_WAIT_PREVIOUS();  // chained launches (DecodeOptions::chained_launch): q and the new K/V rows
  // Diagnostics (DecodeOptions::trace): thread 0 stamps the block's phases; null elsewhere.
  uint64_t* const trace =
      a.trace && threadIdx.x == 0
          ? a.trace + kTraceWords * (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x)
          : nullptr;
  if (trace) {
    trace[0] = global_timer_ns();
    trace[1] = smid();
    trace[2] = clock64();
  }
  constexpr int RK = tc_row_bytes(KT, D), RV = tc_row_bytes(VT, D);
  constexpr int CHK = tc_chunk_bytes(RK), CHV = tc_chunk_bytes(RV);
  constexpr int NCK = RK / CHK, NCV = RV / CHV;  // copy chunks per row
  constexpr bool KQ = is_quantized(KT), VQ = is_quantized(VT);
  constexpr bool KF16 = KT != DType::bf16;  // operand type of QK: bf16 only for bf16 K
  constexpr bool VF16 = VT != DType::bf16;
  constexpr int NK = D / 16;  // k-steps of QK
  constexpr int NM = D / 16;  // m-tiles of PV
  constexpr int STG = 16 * (RK + RV);
  constexpr float kNegInf = -__builtin_huge_valf();

  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int gid = lane >> 2, tig = lane & 3;
#if __CUDA_ARCH__ >= 900
  constexpr bool kRows = ROWS && tc_rows_capable(KT, VT, D);
#else
  constexpr bool kRows = false;
#endif
  // Token-row tiles (the ROWS instantiation): warp w computes KV head w over shared stages.
  constexpr bool rows = kRows;
  const int kvh = rows ? warp : blockIdx.x / a.head_chunks, hc = rows ? 0 : blockIdx.x - kvh * a.head_chunks;
  const ItemRange r = item_range(a, blockIdx.y);
  const int ntok = max(r.t1 - r.t0, 0);
  if (trace) trace[8] = clock_after(static_cast<uint32_t>(r.t1));
  const int heads_here = min(kTcHeads, a.group - hc * kTcHeads);

  // ---- q of this block's heads: its own cp.async group, ahead of the table lookups and the
  // K/V tiles, so its latency hides behind theirs (loaded element by element into
  // registers, it cost ~10 us per block). Heads of a group are contiguous rows of q.
  constexpr int64_t STGR = tc_rows_stage_bytes(KT, VT, D);
  uint8_t* const qs = rows ? smem + (a.stages - 1) * STGR : smem + tc_q_offset(int64_t{kTcWarps} * a.stages * STG, D);
  // With token rows the warps' q rows are [warps][8] in that area; otherwise [8].
  uint8_t* const qw = rows ? qs + warp * tc_q_bytes(D) : qs;
  // Bulk tensor copies (tma_copy.cuh): lane 0 issues each tile's K and V box on its stage's
  // barrier; a tile that ends inside a block reads the block's rows past the sequence too,
  // whose V scales are zeroed before use (K's are masked with the logits).
#if __CUDA_ARCH__ >= 900
  constexpr bool kTma = !ROWS && tc_tma_capable(KT, VT, D);
#else
  constexpr bool kTma = false;
#endif
  const bool tma = kTma && a.tma;
  // Barriers, 8 bytes each: per warp and stage; with token rows, "full" and "empty" per stage
  // and after them each stage's count of usable token rows.
  uint8_t* const bar_area = rows ? smem + (tc_rows_smem_bytes(STGR, a.stages, D) - tc_bar_bytes()) : qs + tc_q_bytes(D);
  const uint32_t bars = smem_addr(bar_area) + (rows ? 0 : warp * 64);
  {
    const int esz = a.q_f32 ? 4 : 2;
    const int row = D * esz;
    // Token rows: all n_q_heads rows of the sequence, head h to slot (h / group) * 8 + h % group.
    const int first = rows ? 0 : kvh * a.group + hc * kTcHeads;
    const int nrows = rows ? kTcWarps * a.group : heads_here;
    const uint8_t* src = static_cast<const uint8_t*>(a.q) + (static_cast<int64_t>(r.seq) * a.n_q_heads + first) * row;
    auto slot = [&](int h) { return rows ? (h / a.group) * kTcHeads + h % a.group : h; };
    if (a.q_align16) {
      const int per_row = row / 16;
      for (int c = threadIdx.x; c < nrows * per_row; c += kTcWarps * 32) {
        const int h = c / per_row, col = c - h * per_row;
        cp_async<16>(smem_addr(qs + slot(h) * tc_q_row_bytes(D) + col * 16), src + static_cast<int64_t>(c) * 16, 16);
      }
    } else {  // 4-byte aligned (checked on the host)
      const int per_row = row / 4;
      for (int c = threadIdx.x; c < nrows * per_row; c += kTcWarps * 32) {
        const int h = c / per_row, col = c - h * per_row;
        cp_async_4(smem_addr(qs + slot(h) * tc_q_row_bytes(D) + col * 4), src + static_cast<int64_t>(c) * 4);
      }
    }
    cp_async_commit();
  }
  const int32_t* trow = a.table + static_cast<int64_t>(r.row) * a.table_stride;

  // q fragments (B operand of QK, k x n = head_dim x head), loaded after the first K/V copies
  // are in flight: bf16/f16 K, hi/lo halves of the operand type per k-step; quantised K, two
  // int8 digits per 32-element block (decode_tc_quant.cuh), the head's digit scale over 254
  // for the columns 2tig, 2tig+1 (cs0, cs1), and for Q4_0 the accumulators' starting values.
  constexpr int NB = D / 32;
  uint32_t qh[KQ ? 1 : NK][2], ql[KQ ? 1 : NK][2];
  uint32_t qd[KQ ? NB : 1][2][2];
  int qc[KT == DType::q4_0 ? NB : 1][2];
  float cs0 = 0.f, cs1 = 0.f;

  float o[NM][4];
#pragma unroll
  for (int i = 0; i < NM; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m0 = kNegInf, m1 = kNegInf, l0 = 0.f, l1 = 0.f;  // heads 2*tig, 2*tig+1

  const int total_tiles = (ntok + 15) >> 4;
  // Per-head blocks: warp w takes tiles w, w + 4, ...; token rows: every warp every tile.
  const int n_my = rows ? total_tiles : total_tiles > warp ? (total_tiles - warp + kTcWarps - 1) / kTcWarps : 0;
  const int S = a.stages;
  uint8_t* wbase = smem + warp * S * STG;
  auto tile_base = [&](int i) { return r.t0 + 16 * (rows ? i : warp + kTcWarps * i); };

  // Block id of token `lane` of tile i (lanes 0..15), fetched ahead of its use.
  struct Meta {
    int32_t blk, tok, page;
    bool valid;
  };
  auto fetch_for = [&](int i, int j, bool want) {
    Meta m;
    m.tok = tile_base(i) + j;
    m.valid = want && i < n_my && m.tok < r.t1;
    m.page = m.valid ? page_of(a, m.tok) : 0;
    m.blk = m.valid ? __ldg(trow + m.page) : 0;
    return m;
  };
  auto fetch = [&](int i) { return fetch_for(i, lane, lane < 16); };
  // The cp.async path's row index of this lane's token; with bulk copies, the token row (of
  // lane 0's token, the tile's first).
  auto to_row = [&](const Meta& m) -> int64_t {
    if (!m.valid) return -1;
    return tma ? kv_token_row(a, m.blk, m.tok, m.page) : kv_row(a, m.blk, m.tok, m.page, kvh);
  };

  auto issue = [&](int i, int st, int64_t myrow) {
    if constexpr (kTma) {
      if (tma) {
#if __CUDA_ARCH__ >= 900
        if (lane == 0 && i < n_my) {
          const uint32_t bar = bars + 8 * st, kst = smem_addr(wbase + st * STG);
          // A refused block id reads a box past the tensor, which arrives as zeros.
          const int32_t row = myrow >= 0 ? static_cast<int32_t>(myrow) : 0x7fffffff - 16;
          mbar_arrive_expect_tx(bar, STG);
          tma_load_3d(kst, maps.k, bar, 0, kvh, row);
          tma_load_3d(kst + 16 * RK, maps.v, bar, 0, kvh, row);
        }
#endif
        return;
      }
    }
    if (i < n_my) {
      uint8_t* kst = wbase + st * STG;
      uint8_t* vst = kst + 16 * RK;
#pragma unroll
      for (int it = 0; it < (16 * NCK + 31) / 32; ++it) {
        const int c = lane + 32 * it;
        const bool ok = c < 16 * NCK;
        const int row = ok ? c / NCK : 0;
        const int col = c - row * NCK;
        const int64_t ri = __shfl_sync(0xffffffffu, myrow, row);
        if (ok) {
          const int pcol = KQ ? col : (col ^ (row & 7));
          cp_async<CHK>(smem_addr(kst + row * RK + pcol * CHK), a.k_pool + (ri >= 0 ? ri * RK : 0) + col * CHK,
                        ri >= 0 ? CHK : 0);
        }
      }
#pragma unroll
      for (int it = 0; it < (16 * NCV + 31) / 32; ++it) {
        const int c = lane + 32 * it;
        const bool ok = c < 16 * NCV;
        const int row = ok ? c / NCV : 0;
        const int col = c - row * NCV;
        const int64_t ri = __shfl_sync(0xffffffffu, myrow, row);
        if (ok) {
          const int pcol = VQ ? col : (col ^ (row & 7));
          cp_async<CHV>(smem_addr(vst + row * RV + pcol * CHV), a.v_pool + (ri >= 0 ? ri * RV : 0) + col * CHV,
                        ri >= 0 ? CHV : 0);
        }
      }
    }
    cp_async_commit();
  };

  // One tile: kst / vst are this warp's first K / V row, sk / sv the token row strides (the
  // bf16/f16 path's tiles are per warp, stride RK / RV), `valid` the tile's usable rows.
  auto compute = [&](const uint8_t* kst, const uint8_t* vst, int sk, int sv, int valid) {
    float s[4] = {0.f, 0.f, 0.f, 0.f};
    // ---- S^T = K Q^T (rows: tokens gid, gid+8; columns: heads 2tig, 2tig+1)
    if constexpr (!KQ) {
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
      const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8;
      const uint8_t* lbase = kst + lrow * RK;
#pragma unroll
      for (int ks = 0; ks < NK; ++ks) {
        const int col = 2 * ks + (lane >> 4);
        uint32_t af[4];
        ldsm_x4(af, smem_addr(lbase + ((col ^ (lrow & 7)) << 4)));
        if (ks & 1) {
          mma16816<KF16>(acc, af, qh[ks][0], qh[ks][1]);
          mma16816<KF16>(acc, af, ql[ks][0], ql[ks][1]);
        } else {
          mma16816<KF16>(s, af, qh[ks][0], qh[ks][1]);
          mma16816<KF16>(s, af, ql[ks][0], ql[ks][1]);
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) s[j] += acc[j];
    } else {
      const uint8_t* r0 = kst + gid * sk;
      const uint8_t* r1 = r0 + 8 * sk;
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        uint32_t A[4];
        float dk0, dk1;
        k_fragment<KT == DType::q8_0>(r0, r1, b, tig, A, dk0, dk1);
        int c0[4], c1[4];
        const int zero[4] = {0, 0, 0, 0};
        if constexpr (KT == DType::q8_0) {
          imma16832<false>(c0, A, qd[b][0][0], qd[b][0][1], zero);
          imma16832<false>(c1, A, qd[b][1][0], qd[b][1][1], zero);
        } else {
          const int init[4] = {qc[b][0], qc[b][1], qc[b][0], qc[b][1]};
          imma16832<true>(c0, A, qd[b][0][0], qd[b][0][1], zero);
          imma16832<true>(c1, A, qd[b][1][0], qd[b][1][1], init);
        }
        s[0] += dk0 * static_cast<float>(c0[0] * 254 + c1[0]);
        s[1] += dk0 * static_cast<float>(c0[1] * 254 + c1[1]);
        s[2] += dk1 * static_cast<float>(c0[2] * 254 + c1[2]);
        s[3] += dk1 * static_cast<float>(c0[3] * 254 + c1[3]);
      }
      s[0] *= cs0, s[1] *= cs1, s[2] *= cs0, s[3] *= cs1;
    }
    // ---- mask tokens past the chunk, online softmax (base 2). The running maximum is only
    // raised (a warp-wide reduction and a rescale of O) when some logit exceeds it by more
    // than kSlack; otherwise probabilities up to 2^kSlack are accumulated as they are, which
    // fp32 sums and the hi/lo operand split carry without loss.
    constexpr float kSlack = 8.f;
    if (gid >= valid) s[0] = s[1] = kNegInf;
    if (gid + 8 >= valid) s[2] = s[3] = kNegInf;
    {
      float mx0 = fmaxf(s[0], s[2]), mx1 = fmaxf(s[1], s[3]);
      if (__any_sync(0xffffffffu, mx0 > m0 + kSlack || mx1 > m1 + kSlack)) {
#pragma unroll
        for (int off = 4; off < 32; off <<= 1) {
          mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
          mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
        }
        const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        // m == -inf only before any valid token; then O and l are still zero.
        const float al0 = m0 == kNegInf ? 0.f : fast_exp2(m0 - mn0);
        const float al1 = m1 == kNegInf ? 0.f : fast_exp2(m1 - mn1);
        l0 *= al0;
        l1 *= al1;
#pragma unroll
        for (int i = 0; i < NM; ++i) {
          o[i][0] *= al0;
          o[i][1] *= al1;
          o[i][2] *= al0;
          o[i][3] *= al1;
        }
        m0 = mn0;
        m1 = mn1;
      }
    }
    const float base0 = m0 == kNegInf ? 0.f : m0, base1 = m1 == kNegInf ? 0.f : m1;
    const float p0 = fast_exp2(s[0] - base0), p1 = fast_exp2(s[1] - base1);
    const float p2 = fast_exp2(s[2] - base0), p3 = fast_exp2(s[3] - base1);
    l0 += p0 + p2;
    l1 += p1 + p3;
    // ---- P (rows tokens, columns heads) -> P^T fragments (k = tokens, n = heads), fp32
    float pb[4];
    {
      auto transpose_pair = [](float x, float y, float& u, float& v) {
        const uint32_t ux = __float_as_uint(x), uy = __float_as_uint(y);
        const uint32_t hi = movmatrix_trans(__byte_perm(ux, uy, 0x7632));
        const uint32_t lo = movmatrix_trans(__byte_perm(ux, uy, 0x5410));
        u = __uint_as_float(__byte_perm(lo, hi, 0x5410));
        v = __uint_as_float(__byte_perm(lo, hi, 0x7632));
      };
      transpose_pair(p0, p1, pb[0], pb[1]);  // tokens 2tig, 2tig+1 of head gid
      transpose_pair(p2, p3, pb[2], pb[3]);  // tokens 2tig+8, 2tig+9
    }
    // ---- O^T += V^T P^T
    if constexpr (!VQ) {
      uint32_t bh0, bl0, bh1, bl1;
      split_pair<VF16>(pb[0], pb[1], bh0, bl0);
      split_pair<VF16>(pb[2], pb[3], bh1, bl1);
      const int j = lane >> 3;
      const int ltok = (lane & 7) + (j >> 1) * 8;
      const uint8_t* lbase = vst + ltok * RV;
#pragma unroll
      for (int i = 0; i < NM; ++i) {
        const int col = 2 * i + (j & 1);
        uint32_t af[4];
        ldsm_x4_trans(af, smem_addr(lbase + ((col ^ (ltok & 7)) << 4)));
        mma16816<VF16>(o[i], af, bh0, bh1);
        mma16816<VF16>(o[i], af, bl0, bl1);
      }
    } else {
      const uint8_t* const vrows[4] = {vst + (2 * tig) * sv, vst + (2 * tig + 1) * sv, vst + (2 * tig + 8) * sv,
                                       vst + (2 * tig + 9) * sv};
      constexpr bool kQ8 = VT == DType::q8_0;
      constexpr int BB = kQ8 ? 34 : 18;
      uint32_t ph01, pl01, ph23, pl23;
      split_pair<true>(pb[0], pb[1], ph01, pl01);
      split_pair<true>(pb[2], pb[3], ph23, pl23);
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        uint32_t xh01, xl01, xh23, xl23;
        scale_p(ph01, pl01, scale_pair(vrows[0], vrows[1], BB, b), xh01, xl01);
        scale_p(ph23, pl23, scale_pair(vrows[2], vrows[3], BB, b), xh23, xl23);
        uint32_t A0[4], A1[4];
        v_fragments<kQ8>(vrows, b, gid, A0, A1);
        mma16816<true>(o[2 * b], A0, xh01, xh23);
        mma16816<true>(o[2 * b], A0, xl01, xl23);
        mma16816<true>(o[2 * b + 1], A1, xh01, xh23);
        mma16816<true>(o[2 * b + 1], A1, xl01, xl23);
      }
    }
  };

#if __CUDA_ARCH__ >= 900
  if constexpr (kTma) {
    if (tma) {
      if (lane == 0) {
        for (int st = 0; st < S; ++st) mbar_init(bars + 8 * st, 1);
        mbar_fence_init();
      }
      __syncwarp();
    }
  }
#endif
  // ---- token rows: warp 0's lane 0 fills the shared stages (lanes 1..S-2 the first ones),
  // each with one bulk copy per operand of 16 whole token rows, after the four warps have
  // released the stage (its "empty" barrier); every warp waits on the stage's "full" one.
  const uint32_t full = bars, empty = bars + 64;
  int* const stage_valid = reinterpret_cast<int*>(bar_area + 128);
  // Token row of tile i's first token; -1 when the guard refuses its block id.
  auto tile_row = [&](int i) -> int64_t {
    const int32_t tok = tile_base(i);
    const int32_t page = page_of(a, tok);
    return kv_token_row(a, __ldg(trow + page), tok, page);
  };
  auto issue_rows = [&](int j, int64_t trow_index) {
#if __CUDA_ARCH__ >= 900
    if constexpr (kRows) {
      const int st = j % S;
      // A refused block id copies the pool's first rows and counts no usable row.
      stage_valid[st] = trow_index < 0 ? 0 : min(16, r.t1 - tile_base(j));
      const int32_t row = trow_index < 0 ? 0 : static_cast<int32_t>(trow_index);
      constexpr uint32_t KB = 16 * kTcWarps * RK, VB = 16 * kTcWarps * RV;
      const uint32_t dst = smem_addr(smem + st * STGR), bar = full + 8 * st;
      mbar_arrive_expect_tx(bar, KB + VB);
      tma_load_3d(dst, maps.k, bar, 0, row, 0);
      tma_load_3d(dst + KB, maps.v, bar, 0, row, 0);
    }
#else
    (void)j, (void)trow_index;
#endif
  };
  int64_t pend_row = -1;  // warp 0, lane 0: tile_row of the next tile to issue
  if (rows) {
#if __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) {
      for (int st = 0; st < S; ++st) {
        mbar_init(full + 8 * st, 1);
        mbar_init(empty + 8 * st, kTcWarps);
      }
      mbar_fence_init();
    }
    if (warp == 0) {
      __syncwarp();
      if (lane < S - 1 && lane < n_my) issue_rows(lane, tile_row(lane));
      if (lane == 0 && S - 1 < n_my) pend_row = tile_row(S - 1);
      if (trace) trace[9] = clock_after(static_cast<uint32_t>(pend_row));
    }
#endif
  }
  // ---- per-head blocks: stages 0..S-2 in flight before the first tile is consumed. Lanes
  // 16..31 look up the block ids of the second stage of each pair, so the table is read in
  // ceil((S-1)/2) round trips rather than S-1.
  for (int st = 0; !rows && st < S - 1; st += 2) {
    const int mine = st + (lane >> 4);
    const int64_t row = to_row(fetch_for(mine, lane & 15, mine < S - 1));
    const int64_t row2 = __shfl_down_sync(0xffffffffu, row, 16);
    if (trace && st == 0) trace[9] = clock_after(static_cast<uint32_t>(row));
    issue(st, st, row);
    if (st + 1 < S - 1) issue(st + 1, st + 1, row2);
  }
  if (trace) trace[12] = clock64();
  Meta pend = rows ? Meta{} : fetch(S - 1);
  // q has landed once at most the S - 1 tile groups issued after it are pending (with bulk
  // copies it is the only group); the other warps' parts of it are visible after the barrier.
  if (tma || rows)
    cp_async_wait<0>();
  else
    cp_async_wait_dyn(S - 1);
  __syncthreads();
  if (trace) trace[14] = clock64();
  // The fragments are built by straight-line code, one copy per q type (fp32 or bf16 rows):
  // with a branch around every load (absent head, q type) each load's latency was paid in
  // turn, ~2-4 us of every block's start-up. Absent heads read row 0 and scale it by zero.
  auto build_q = [&](auto q_f32_tag) {
    constexpr bool QF32 = decltype(q_f32_tag)::value;
    const bool hv = gid < heads_here;
    const uint8_t* qrow = qw + (hv ? gid : 0) * tc_q_row_bytes(D);
    const float qscale = hv ? a.q_scale : 0.f;
    // Elements dim..dim+3 of this lane's head (dim a multiple of 4), scaled.
    auto q4 = [&](int dim) {
      float4 v;
      if constexpr (QF32) {
        v = *reinterpret_cast<const float4*>(qrow + dim * 4);
      } else {
        const uint2 w = *reinterpret_cast<const uint2*>(qrow + dim * 2);
        v = make_float4(__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u), __uint_as_float(w.y << 16),
                        __uint_as_float(w.y & 0xffff0000u));
      }
      return make_float4(v.x * qscale, v.y * qscale, v.z * qscale, v.w * qscale);
    };
    if constexpr (!KQ) {
#pragma unroll
      for (int s = 0; s < NK; ++s) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int dim = k_dim(s, 2 * tig + 8 * j);  // even; dim + 1 is the pair's second element
          float x0, x1;
          if constexpr (QF32) {
            const float2 v = *reinterpret_cast<const float2*>(qrow + dim * 4);
            x0 = v.x, x1 = v.y;
          } else {
            const uint32_t v = *reinterpret_cast<const uint32_t*>(qrow + dim * 2);
            x0 = __uint_as_float(v << 16), x1 = __uint_as_float(v & 0xffff0000u);
          }
          split_pair<KF16>(x0 * qscale, x1 * qscale, qh[s][j], ql[s][j]);
        }
      }
    } else {
      // Two int8 digits per element against one scale per head: sigma = max|q| / 127 over the
      // head's row (the four tig lanes of a gid hold all of it), q/sigma = d0 + d1/254.
      constexpr bool kQ8 = KT == DType::q8_0;
      float amax = 0.f;
#pragma unroll
      for (int b = 0; b < NB; ++b) {
#pragma unroll
        for (int reg = 0; reg < 2; ++reg) {
          const float4 v = q4(q_k_dim<kQ8>(b, reg, 0, tig));
          amax = fmaxf(amax, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
        }
      }
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
      const float inv = amax > 0.f ? 127.f / amax : 0.f;
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        int tsum = 0;  // 254 * sum d0 + sum d1 over this lane's elements of the block
#pragma unroll
        for (int reg = 0; reg < 2; ++reg) {
          const float4 v = q4(q_k_dim<kQ8>(b, reg, 0, tig));
          const float x[4] = {v.x * inv, v.y * inv, v.z * inv, v.w * inv};
          uint32_t p0 = 0, p1 = 0;
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float t0 = round_magic(x[i]);
            const float d0 = __fsub_rn(t0, kRoundMagic);
            const float t1 = round_magic(__fmul_rn(__fsub_rn(x[i], d0), 254.f));
            const int i0 = magic_int(t0), i1 = magic_int(t1);
            p0 |= (static_cast<uint32_t>(i0) & 0xffu) << (8 * i);
            p1 |= (static_cast<uint32_t>(i1) & 0xffu) << (8 * i);
            tsum += 254 * i0 + i1;
          }
          qd[b][0][reg] = p0;
          qd[b][1][reg] = p1;
        }
        if constexpr (!kQ8) {
          tsum += __shfl_xor_sync(0xffffffffu, tsum, 1);
          tsum += __shfl_xor_sync(0xffffffffu, tsum, 2);
          qc[b][0] = -8 * __shfl_sync(0xffffffffu, tsum, 8 * tig);
          qc[b][1] = -8 * __shfl_sync(0xffffffffu, tsum, 8 * tig + 4);
        }
      }
      // Columns 2tig, 2tig+1 are the heads of lanes 8tig and 8tig + 4.
      const float unit = amax / (127.f * 254.f);
      cs0 = __shfl_sync(0xffffffffu, unit, 8 * tig);
      cs1 = __shfl_sync(0xffffffffu, unit, 8 * tig + 4);
    }
  };
  if (a.q_f32)
    build_q(std::true_type{});
  else
    build_q(std::false_type{});
  if (trace) {
    if constexpr (KQ)
      trace[10] = clock_after(qd[NB - 1][1][1]);
    else
      trace[10] = clock_after(qh[NK - 1][1] ^ ql[NK - 1][1]);
  }
  // A bulk copy brings a whole 16-row box: the V block scales of its rows from `valid` on (past
  // the chunk, or of a refused block) are zeroed so no stale NaN meets a zero probability
  // (K's rows are masked with the logits). Quantised V only (its rows hold the scales).
  auto zero_v_scales = [&](uint8_t* vst, int valid) {
    constexpr int BB = VT == DType::q8_0 ? 34 : 18;  // bytes per 32-element block
    for (int x = lane; x < 16 * NB; x += 32) {
      const int row = x / NB, b = x - row * NB;
      if (row >= valid) *reinterpret_cast<uint16_t*>(vst + row * RV + BB * b) = 0;
    }
    __syncwarp();
  };
  int st_load = S - 1, st_use = 0;
  uint32_t parity = 0;  // of the barriers' phase the next wait on stage st_use completes
  if (rows) {
#if __CUDA_ARCH__ >= 900
    __syncthreads();  // q's area (the last stage) is refilled once every warp holds its q
    for (int i = 0; i < n_my; ++i) {
      if (threadIdx.x == 0) {
        const int j = i + S - 1;
        if (j < n_my) {
          if (j >= S) mbar_wait(empty + 8 * (j % S), static_cast<uint32_t>((j / S - 1) & 1));
          issue_rows(j, pend_row);
          if (j + 1 < n_my) pend_row = tile_row(j + 1);
        }
      }
      __syncwarp();
      mbar_wait(full + 8 * st_use, parity);
      if (trace && i < 2) trace[i == 0 ? 3 : 13] = clock64();
      uint8_t* kst = smem + st_use * STGR + warp * 16 * RK;
      uint8_t* vst = smem + st_use * STGR + 16 * kTcWarps * RK + warp * 16 * RV;
      const int valid = stage_valid[st_use];
      if (valid < 16) zero_v_scales(vst, valid);  // rows past the sequence or a refused block
      compute(kst, vst, RK, RV, valid);
      __syncwarp();
      if (lane == 0) mbar_arrive(empty + 8 * st_use);
      st_use = st_use + 1 == S ? 0 : st_use + 1;
      parity ^= st_use == 0 ? 1u : 0u;
    }
#endif
  }
  for (int i = 0; !rows && i < n_my; ++i) {
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
    if (trace && i < 2) trace[i == 0 ? 3 : 13] = clock64();
    issue(i + S - 1, st_load, to_row(pend));
    pend = fetch(i + S);
    if constexpr (kTma) {
      // A box that ends past the chunk brought the block's later rows.
      const int valid = r.t1 - tile_base(i);
      if (tma && valid < 16) zero_v_scales(wbase + st_use * STG + 16 * RK, valid);
    }
    compute(wbase + st_use * STG, wbase + st_use * STG + 16 * RK, RK, RV, min(16, r.t1 - tile_base(i)));
    __syncwarp();
    st_load = st_load + 1 == S ? 0 : st_load + 1;
    st_use = st_use + 1 == S ? 0 : st_use + 1;
    parity ^= st_use == 0 ? 1u : 0u;
  }
  cp_async_wait<0>();
  if (trace) trace[4] = clock64();
  // The merge kernel (launched with programmatic stream serialization) may start its launch
  // now; it waits for this grid's results before reading them.
  DS_GPU_ALLOW_NEXT();

  // ---- merge the warps' states and write
#pragma unroll
  for (int off = 4; off < 32; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  if (trace) trace[11] = clock_after(__float_as_uint(l0 + l1));
  if (rows) {
    // Token rows: each warp holds its head's whole chunk; its rows, scaled by 1 / l, go out
    // through its own part of the (drained) stages, with the log-sum-exp in each row's padding.
    constexpr int RS = D + 4;
    __syncthreads();  // every warp is done with the stages
    float* mine = reinterpret_cast<float*>(smem) + warp * kTcHeads * RS;
    const float f0 = l0 > 0.f ? 1.f / l0 : 0.f, f1 = l1 > 0.f ? 1.f / l1 : 0.f;
#pragma unroll
    for (int i = 0; i < NM; ++i) {
      const int d0 = v_dim<VT>(i, gid), d1 = v_dim<VT>(i, gid + 8);
      mine[(2 * tig) * RS + d0] = o[i][0] * f0;
      mine[(2 * tig + 1) * RS + d0] = o[i][1] * f1;
      mine[(2 * tig) * RS + d1] = o[i][2] * f0;
      mine[(2 * tig + 1) * RS + d1] = o[i][3] * f1;
    }
    if (gid == 0) {
      mine[(2 * tig) * RS + D] = l0 > 0.f ? m0 + log2f(l0) : kNegInf;
      mine[(2 * tig + 1) * RS + D] = l1 > 0.f ? m1 + log2f(l1) : kNegInf;
    }
    __syncwarp();
    for (int idx = lane; idx < heads_here * (D / 4); idx += 32) {
      const int h = idx / (D / 4), d = 4 * (idx - h * (D / 4));
      write_result4(a, r, kvh * a.group + h, d, *reinterpret_cast<const float4*>(mine + h * RS + d), mine[h * RS + D]);
    }
    if (trace) trace_end(trace, ntok);
    return;
  }
  // Exchange the warps' maxima and sums, scale each warp's O by its share of the normaliser
  // in registers, then add the warps' rows and write them four elements at a time.
  __syncthreads();  // every warp is done with its pipeline buffers
  float* red_m = reinterpret_cast<float*>(smem);                      // [warps][8]
  float* red_l = red_m + kTcWarps * kTcHeads;                         // [warps][8]
  float* red_lse = red_l + kTcWarps * kTcHeads;                       // [8]
  float* red = reinterpret_cast<float*>(smem + tc_merge_o_offset());  // [warps][8][D + 4]
  constexpr int RS = D + 4;  // row stride: the four tig lanes' heads fall in different banks
  if (gid == 0) {
    red_m[warp * kTcHeads + 2 * tig] = m0;
    red_m[warp * kTcHeads + 2 * tig + 1] = m1;
    red_l[warp * kTcHeads + 2 * tig] = l0;
    red_l[warp * kTcHeads + 2 * tig + 1] = l1;
  }
  __syncthreads();
  {
    // factor = 2^(m_w - M) / L for this warp's heads 2tig, 2tig+1; zero where the warp had no
    // token (m_w = -inf) or the chunk has none (M = -inf).
    float f[2], lse[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int h = 2 * tig + k;
      float M = kNegInf;
#pragma unroll
      for (int w = 0; w < kTcWarps; ++w) M = fmaxf(M, red_m[w * kTcHeads + h]);
      float L = 0.f;
      if (M != kNegInf) {
#pragma unroll
        for (int w = 0; w < kTcWarps; ++w) L += red_l[w * kTcHeads + h] * exp2f(red_m[w * kTcHeads + h] - M);
      }
      const float mw = k == 0 ? m0 : m1;
      f[k] = (M == kNegInf || mw == kNegInf) ? 0.f : exp2f(mw - M) / L;
      lse[k] = M == kNegInf ? kNegInf : M + log2f(L);
    }
    if (warp == 0 && gid == 0) {
      red_lse[2 * tig] = lse[0];
      red_lse[2 * tig + 1] = lse[1];
    }
    float* mine = red + warp * kTcHeads * RS;
#pragma unroll
    for (int i = 0; i < NM; ++i) {
      const int d0 = v_dim<VT>(i, gid), d1 = v_dim<VT>(i, gid + 8);
      mine[(2 * tig) * RS + d0] = o[i][0] * f[0];
      mine[(2 * tig + 1) * RS + d0] = o[i][1] * f[1];
      mine[(2 * tig) * RS + d1] = o[i][2] * f[0];
      mine[(2 * tig + 1) * RS + d1] = o[i][3] * f[1];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < heads_here * (D / 4); idx += kTcWarps * 32) {
    const int h = idx / (D / 4), d = 4 * (idx - h * (D / 4));
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < kTcWarps; ++w) {
      const float4 v = *reinterpret_cast<const float4*>(red + (w * kTcHeads + h) * RS + d);
      acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
    }
    write_result4(a, r, kvh * a.group + hc * kTcHeads + h, d, acc, red_lse[h]);
  }
  if (trace) trace_end(trace, ntok);
#endif
}

}  // namespace ds::cuda::detail
