// One 16-token tile of the tensor-core decode kernel (decode_tc.cuh) for one warp:
// S^T = K Q^T on the tensor cores (tokens on the 16-row side, the group's query heads on the
// 8-column side, so a GQA group of up to 8 heads costs one tile and every K/V row is loaded
// once), the mask and the online softmax in base 2, then O^T += V^T P^T. The probabilities
// leave the QK accumulators in the wrong layout for the PV operand; movmatrix transposes them
// in registers (as fp32, high and low halves separately).
//
// Precision: q (pre-scaled by scale*log2 e) and P are split into hi + lo parts of the
// operand type and multiplied twice, so products carry ~16 (bf16) or ~22 (f16) significant
// bits into fp32 accumulators. Quantised K goes through the int8 tensor cores with q as two
// int8 digits (~15 bits of q; exact int32 per 32-element block, times the block's scale);
// quantised V enters as exact f16 integers with its block scale applied to P's hi/lo pair
// (decode_tc_quant.cuh). bf16/f16 tiles are XOR-swizzled for conflict-free ldmatrix;
// quantised tiles are raw ggml rows, and each lane reads the bytes of its own fragment. NVIDIA
// sm_80+ only.
#pragma once

#include <cstdint>

#include "kernels/cuda/decode_tc_q.cuh"

namespace ds::cuda::detail {

// The warp's output fragments (O^T, m-tile i: head_dim rows v_dim(i, gid) and
// v_dim(i, gid + 8), heads 2tig and 2tig + 1) and the online softmax state of heads 2tig,
// 2tig + 1: running maximum m and sum l, base 2.
template <int D>
struct TcAccum {
  float o[D / 16][4];
  float m0, m1, l0, l1;
  __device__ __forceinline__ void init() {
#pragma unroll
    for (int i = 0; i < D / 16; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    m0 = m1 = -__builtin_huge_valf();
    l0 = l1 = 0.f;
  }
};

// One tile: kst / vst are this warp's first K / V row, sk / sv the token row strides (the
// bf16/f16 path's tiles are per warp, stride RK / RV), `valid` the tile's usable rows.
template <DType KT, DType VT, int D>
__device__ __forceinline__ void tc_tile(const uint8_t* kst, const uint8_t* vst, int sk, int sv, int valid,
                                        const TcQuery<KT, D>& q, TcAccum<D>& ac, const TcLane& L) {
  using Sh = TcShape<KT, VT, D>;
  [[maybe_unused]] constexpr int RK = Sh::RK, RV = Sh::RV, NK = Sh::NK, NM = Sh::NM, NB = Sh::NB;
  [[maybe_unused]] constexpr bool KQ = Sh::KQ, VQ = Sh::VQ, KF16 = Sh::KF16, VF16 = Sh::VF16;
  constexpr float kNegInf = -__builtin_huge_valf();
  const int lane = L.lane, gid = L.gid, tig = L.tig;
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
        mma16816<KF16>(acc, af, q.qh[ks][0], q.qh[ks][1]);
        mma16816<KF16>(acc, af, q.ql[ks][0], q.ql[ks][1]);
      } else {
        mma16816<KF16>(s, af, q.qh[ks][0], q.qh[ks][1]);
        mma16816<KF16>(s, af, q.ql[ks][0], q.ql[ks][1]);
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
        imma16832<false>(c0, A, q.qd[b][0][0], q.qd[b][0][1], zero);
        imma16832<false>(c1, A, q.qd[b][1][0], q.qd[b][1][1], zero);
      } else {
        const int init[4] = {q.qc[b][0], q.qc[b][1], q.qc[b][0], q.qc[b][1]};
        imma16832<true>(c0, A, q.qd[b][0][0], q.qd[b][0][1], zero);
        imma16832<true>(c1, A, q.qd[b][1][0], q.qd[b][1][1], init);
      }
      s[0] += dk0 * static_cast<float>(c0[0] * 254 + c1[0]);
      s[1] += dk0 * static_cast<float>(c0[1] * 254 + c1[1]);
      s[2] += dk1 * static_cast<float>(c0[2] * 254 + c1[2]);
      s[3] += dk1 * static_cast<float>(c0[3] * 254 + c1[3]);
    }
    s[0] *= q.cs0, s[1] *= q.cs1, s[2] *= q.cs0, s[3] *= q.cs1;
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
    if (__any_sync(0xffffffffu, mx0 > ac.m0 + kSlack || mx1 > ac.m1 + kSlack)) {
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
      }
      const float mn0 = fmaxf(ac.m0, mx0), mn1 = fmaxf(ac.m1, mx1);
      // m == -inf only before any valid token; then O and l are still zero.
      const float al0 = ac.m0 == kNegInf ? 0.f : fast_exp2(ac.m0 - mn0);
      const float al1 = ac.m1 == kNegInf ? 0.f : fast_exp2(ac.m1 - mn1);
      ac.l0 *= al0;
      ac.l1 *= al1;
#pragma unroll
      for (int i = 0; i < NM; ++i) {
        ac.o[i][0] *= al0;
        ac.o[i][1] *= al1;
        ac.o[i][2] *= al0;
        ac.o[i][3] *= al1;
      }
      ac.m0 = mn0;
      ac.m1 = mn1;
    }
  }
  const float base0 = ac.m0 == kNegInf ? 0.f : ac.m0, base1 = ac.m1 == kNegInf ? 0.f : ac.m1;
  const float p0 = fast_exp2(s[0] - base0), p1 = fast_exp2(s[1] - base1);
  const float p2 = fast_exp2(s[2] - base0), p3 = fast_exp2(s[3] - base1);
  ac.l0 += p0 + p2;
  ac.l1 += p1 + p3;
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
      mma16816<VF16>(ac.o[i], af, bh0, bh1);
      mma16816<VF16>(ac.o[i], af, bl0, bl1);
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
      mma16816<true>(ac.o[2 * b], A0, xh01, xh23);
      mma16816<true>(ac.o[2 * b], A0, xl01, xl23);
      mma16816<true>(ac.o[2 * b + 1], A1, xh01, xh23);
      mma16816<true>(ac.o[2 * b + 1], A1, xl01, xl23);
    }
  }
}

// A bulk copy brings a whole 16-row box: the V block scales of its rows from `valid` on (past
// the chunk, or of a refused block) are zeroed so no stale NaN meets a zero probability
// (K's rows are masked with the logits). Quantised V only (its rows hold the scales).
template <DType VT, int D>
__device__ __forceinline__ void tc_zero_v_scales(uint8_t* vst, int valid, int lane) {
  constexpr int RV = tc_row_bytes(VT, D), NB = D / 32;
  constexpr int BB = VT == DType::q8_0 ? 34 : 18;  // bytes per 32-element block
  for (int x = lane; x < 16 * NB; x += 32) {
    const int row = x / NB, b = x - row * NB;
    if (row >= valid) *reinterpret_cast<uint16_t*>(vst + row * RV + BB * b) = 0;
  }
  __syncwarp();
}

}  // namespace ds::cuda::detail
