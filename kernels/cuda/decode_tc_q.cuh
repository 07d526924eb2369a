// The query side of the tensor-core decode kernel (decode_tc.cuh): the block's q rows copied
// into shared memory as the first cp.async group, and the B-operand fragments of S^T = K Q^T
// built from there.
//
// The copy is issued before the block-table lookups and the K/V tiles, so its latency hides
// behind theirs (q loaded element by element into registers was a large part of a block's
// start-up: docs/bench-log, "q through shared memory"). The fragments are built by
// straight-line code, one copy per q type (fp32 or bf16 rows): with a branch around every load
// each load's latency was paid in turn. Absent heads read row 0 and scale it by zero. NVIDIA
// sm_80+ only.
#pragma once

#include <cstdint>

#include "kernels/cuda/decode_common.cuh"
#include "kernels/cuda/decode_tc_layout.h"
#include "kernels/cuda/decode_tc_ptx.cuh"
#include "kernels/cuda/decode_tc_quant.cuh"

namespace ds::cuda::detail {

// Compile-time shape of one instantiation.
template <DType KT, DType VT, int D>
struct TcShape {
  static constexpr int RK = tc_row_bytes(KT, D), RV = tc_row_bytes(VT, D);  // bytes of a K / V row
  static constexpr int CHK = tc_chunk_bytes(RK), CHV = tc_chunk_bytes(RV);  // cp.async granules
  static constexpr int NCK = RK / CHK, NCV = RV / CHV;                       // granules per row
  static constexpr bool KQ = is_quantized(KT), VQ = is_quantized(VT);
  static constexpr bool KF16 = KT != DType::bf16;  // operand type of QK: bf16 only for bf16 K
  static constexpr bool VF16 = VT != DType::bf16;
  static constexpr int NK = D / 16;  // k-steps of QK
  static constexpr int NM = D / 16;  // m-tiles of PV
  static constexpr int NB = D / 32;  // 32-element blocks of the quantised types
  static constexpr int STG = 16 * (RK + RV);                        // one warp's stage (per-head blocks)
  static constexpr int64_t STGR = tc_token_rows_stage_bytes(KT, VT, D);  // one stage of token-row tiles
};

// A thread's place in the block: its warp and lane, and the mma fragment coordinates
// (gid: the fragment's row group, lane / 4; tig: the thread in the group, lane % 4).
struct TcLane {
  int warp, lane, gid, tig;
};
__device__ __forceinline__ TcLane tc_lane() {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  return {warp, lane, lane >> 2, lane & 3};
}

// q fragments (B operand of QK, k x n = head_dim x head) of this lane's heads: bf16/f16 K,
// hi/lo halves of the operand type per k-step; quantised K, two int8 digits per 32-element
// block (decode_tc_quant.cuh), the head's digit scale over 254 for the columns 2tig, 2tig+1
// (cs0, cs1), and for Q4_0 the accumulators' starting values.
template <DType KT, int D>
struct TcQuery {
  static constexpr bool KQ = is_quantized(KT);
  static constexpr int NK = D / 16, NB = D / 32;
  uint32_t qh[KQ ? 1 : NK][2], ql[KQ ? 1 : NK][2];
  uint32_t qd[KQ ? NB : 1][2][2];
  int qc[KT == DType::q4_0 ? NB : 1][2];
  float cs0, cs1;
  // A value that depends on every fragment (for a phase stamp once they are built).
  __device__ __forceinline__ uint32_t last() const {
    if constexpr (KQ)
      return qd[NB - 1][1][1];
    else
      return qh[NK - 1][1] ^ ql[NK - 1][1];
  }
};

// Copies `nrows` q rows of sequence `seq` from query head `first` on into shared memory at
// qs, row h into slot(h) (rows of tc_q_row_bytes(D)), as one committed cp.async group.
template <int D, typename Slot>
__device__ __forceinline__ void tc_copy_q(const DecodeArgs& a, int seq, int first, int nrows, uint8_t* qs, Slot slot) {
  const int esz = a.q_f32 ? 4 : 2;
  const int row = D * esz;
  const uint8_t* src = static_cast<const uint8_t*>(a.q) + (static_cast<int64_t>(seq) * a.n_q_heads + first) * row;
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

// The fragments of this lane's heads from q rows in shared memory (qw: the warp's [8] rows),
// for q rows of fp32 (QF32) or bf16. heads_here of the 8 heads exist.
template <DType KT, int D, bool QF32>
__device__ __forceinline__ void tc_build_q_from(const uint8_t* qw, int heads_here, float q_scale, const TcLane& L,
                                                TcQuery<KT, D>& q) {
  constexpr int NK = D / 16, NB = D / 32;
  const int gid = L.gid, tig = L.tig;
  const bool hv = gid < heads_here;
  const uint8_t* qrow = qw + (hv ? gid : 0) * tc_q_row_bytes(D);
  const float qscale = hv ? q_scale : 0.f;
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
  if constexpr (!is_quantized(KT)) {
    constexpr bool KF16 = KT != DType::bf16;
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
        split_pair<KF16>(x0 * qscale, x1 * qscale, q.qh[s][j], q.ql[s][j]);
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
        q.qd[b][0][reg] = p0;
        q.qd[b][1][reg] = p1;
      }
      if constexpr (!kQ8) {
        tsum += __shfl_xor_sync(0xffffffffu, tsum, 1);
        tsum += __shfl_xor_sync(0xffffffffu, tsum, 2);
        q.qc[b][0] = -8 * __shfl_sync(0xffffffffu, tsum, 8 * tig);
        q.qc[b][1] = -8 * __shfl_sync(0xffffffffu, tsum, 8 * tig + 4);
      }
    }
    // Columns 2tig, 2tig+1 are the heads of lanes 8tig and 8tig + 4.
    const float unit = amax / (127.f * 254.f);
    q.cs0 = __shfl_sync(0xffffffffu, unit, 8 * tig);
    q.cs1 = __shfl_sync(0xffffffffu, unit, 8 * tig + 4);
  }
}

template <DType KT, int D>
__device__ __forceinline__ void tc_build_q(const DecodeArgs& a, const uint8_t* qw, int heads_here, const TcLane& L,
                                           TcQuery<KT, D>& q) {
  q.cs0 = q.cs1 = 0.f;
  if (a.q_f32)
    tc_build_q_from<KT, D, true>(qw, heads_here, a.q_scale, L, q);
  else
    tc_build_q_from<KT, D, false>(qw, heads_here, a.q_scale, L, q);
}

}  // namespace ds::cuda::detail
