// The end of the tensor-core decode kernel (decode_tc.cuh): the warps' softmax sums reduced
// over their lanes, then either the four warps' partial results of the same heads merged and
// written (per-head blocks), or each warp's own head written (token-row tiles), as the output
// (a sequence's only chunk) or as a partial with its log-sum-exp (write_result4). The merge
// runs through the drained pipeline buffers. NVIDIA sm_80+ only.
#pragma once

#include "kernels/cuda/decode_tc_tile.cuh"

namespace ds::cuda::detail {

// Each lane's l0, l1 become the sums over its heads' 8 lanes (the gid groups).
template <int D>
__device__ __forceinline__ void tc_reduce_sums(TcAccum<D>& ac) {
#pragma unroll
  for (int off = 4; off < 32; off <<= 1) {
    ac.l0 += __shfl_xor_sync(0xffffffffu, ac.l0, off);
    ac.l1 += __shfl_xor_sync(0xffffffffu, ac.l1, off);
  }
}

// Per-head blocks: every warp holds a share of the chunk for the same heads. Exchange the
// warps' maxima and sums, scale each warp's O by its share of the normaliser in registers,
// then add the warps' rows and write them four elements at a time. first_head: the block's
// first query head; heads_here of its 8 heads exist.
template <DType VT, int D>
__device__ __forceinline__ void tc_write_heads(const DecodeArgs& a, const ItemRange& r, uint8_t* smem,
                                               const TcAccum<D>& ac, const TcLane& L, int first_head, int heads_here) {
  constexpr int NM = D / 16;
  constexpr float kNegInf = -__builtin_huge_valf();
  const int warp = L.warp, gid = L.gid, tig = L.tig;
  __syncthreads();  // every warp is done with its pipeline buffers
  float* red_m = reinterpret_cast<float*>(smem);                      // [warps][8]
  float* red_l = red_m + kTcWarps * kTcHeads;                         // [warps][8]
  float* red_lse = red_l + kTcWarps * kTcHeads;                       // [8]
  float* red = reinterpret_cast<float*>(smem + tc_merge_o_offset());  // [warps][8][D + 4]
  constexpr int RS = D + 4;  // row stride: the four tig lanes' heads fall in different banks
  if (gid == 0) {
    red_m[warp * kTcHeads + 2 * tig] = ac.m0;
    red_m[warp * kTcHeads + 2 * tig + 1] = ac.m1;
    red_l[warp * kTcHeads + 2 * tig] = ac.l0;
    red_l[warp * kTcHeads + 2 * tig + 1] = ac.l1;
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
      float Lsum = 0.f;
      if (M != kNegInf) {
#pragma unroll
        for (int w = 0; w < kTcWarps; ++w) Lsum += red_l[w * kTcHeads + h] * exp2f(red_m[w * kTcHeads + h] - M);
      }
      const float mw = k == 0 ? ac.m0 : ac.m1;
      f[k] = (M == kNegInf || mw == kNegInf) ? 0.f : exp2f(mw - M) / Lsum;
      lse[k] = M == kNegInf ? kNegInf : M + log2f(Lsum);
    }
    if (warp == 0 && gid == 0) {
      red_lse[2 * tig] = lse[0];
      red_lse[2 * tig + 1] = lse[1];
    }
    float* mine = red + warp * kTcHeads * RS;
#pragma unroll
    for (int i = 0; i < NM; ++i) {
      const int d0 = v_dim<VT>(i, gid), d1 = v_dim<VT>(i, gid + 8);
      mine[(2 * tig) * RS + d0] = ac.o[i][0] * f[0];
      mine[(2 * tig + 1) * RS + d0] = ac.o[i][1] * f[1];
      mine[(2 * tig) * RS + d1] = ac.o[i][2] * f[0];
      mine[(2 * tig + 1) * RS + d1] = ac.o[i][3] * f[1];
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
    write_result4(a, r, first_head + h, d, acc, red_lse[h]);
  }
}

// Token-row tiles: each warp holds its head's whole chunk; its rows, scaled by 1 / l, go out
// through its own part of the (drained) stages, with the log-sum-exp in each row's padding.
// first_head: the warp's KV head's first query head; heads_here of the group exist.
template <DType VT, int D>
__device__ __forceinline__ void tc_write_token_rows(const DecodeArgs& a, const ItemRange& r, uint8_t* smem,
                                              const TcAccum<D>& ac, const TcLane& L, int first_head, int heads_here) {
  constexpr int NM = D / 16;
  constexpr float kNegInf = -__builtin_huge_valf();
  const int gid = L.gid, tig = L.tig;
  constexpr int RS = D + 4;
  __syncthreads();  // every warp is done with the stages
  float* mine = reinterpret_cast<float*>(smem) + L.warp * kTcHeads * RS;
  const float f0 = ac.l0 > 0.f ? 1.f / ac.l0 : 0.f, f1 = ac.l1 > 0.f ? 1.f / ac.l1 : 0.f;
#pragma unroll
  for (int i = 0; i < NM; ++i) {
    const int d0 = v_dim<VT>(i, gid), d1 = v_dim<VT>(i, gid + 8);
    mine[(2 * tig) * RS + d0] = ac.o[i][0] * f0;
    mine[(2 * tig + 1) * RS + d0] = ac.o[i][1] * f1;
    mine[(2 * tig) * RS + d1] = ac.o[i][2] * f0;
    mine[(2 * tig + 1) * RS + d1] = ac.o[i][3] * f1;
  }
  if (gid == 0) {
    mine[(2 * tig) * RS + D] = ac.l0 > 0.f ? ac.m0 + log2f(ac.l0) : kNegInf;
    mine[(2 * tig + 1) * RS + D] = ac.l1 > 0.f ? ac.m1 + log2f(ac.l1) : kNegInf;
  }
  __syncwarp();
  for (int idx = L.lane; idx < heads_here * (D / 4); idx += 32) {
    const int h = idx / (D / 4), d = 4 * (idx - h * (D / 4));
    write_result4(a, r, first_head + h, d, *reinterpret_cast<const float4*>(mine + h * RS + d), mine[h * RS + D]);
  }
}

}  // namespace ds::cuda::detail
