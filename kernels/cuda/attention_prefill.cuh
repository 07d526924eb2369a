// Paged prefill attention in one FlashAttention-style kernel: a chunk's queries against its
// sequence's K/V read straight from the paged pool, online softmax in registers, no score
// matrix and no gather pass. The kernels here are thin: the loads (attention_prefill_loads.cuh),
// one tile's wgmma groups and softmax (attention_prefill_tile.cuh) and the write
// (attention_prefill_epilogue.cuh) over the layout of attention_prefill_layout.cuh; the
// launcher (splits, grids) is attention_prefill.cu.
//
// A CTA takes 128 query rows of one KV head. The rows are (token, query head of the KV head's
// GQA group) pairs, token-major, so the group's heads share every K/V tile the CTA loads, and
// the causal limit is per row: row R of the chunk (token t = R / G) sees keys
// [0, n_cached + t]. Two warpgroups own 64 rows each; per 64-key tile a warpgroup computes
// S = Q Kᵀ with Hopper's warpgroup MMA (wgmma, Q and K from shared memory) and O += P V with
// P from registers and V from shared memory (f32 accumulation), keeping the running max and
// sum of each row. wgmma reads its operands from shared memory once per warpgroup, where
// mma.sync fed each warp its own copy through ldmatrix: that shared-memory traffic bounded
// the mma.sync version of this kernel (docs/bench-log, "Prefill attention on wgmma").
// Each iteration issues S of tile kt + 1 and P V of tile kt together and computes the softmax
// of tile kt + 1 while the tensor cores do P V (FlashAttention-3's in-warpgroup overlap).
// K and V tiles are double-buffered in wgmma's 128-byte swizzled layout (wgmma.cuh): K of tile
// kt + 2 and V of tile kt + 1 load meanwhile (cp.async for bf16 pools; other K/V types are
// widened to bf16 by the threads on the way in). Q rounds to bf16 as it loads. One CTA per SM
// (195 KiB of shared memory at head_dim 256).
//
// When the chunk has too few rows to fill the GPU (a short chunk after a long cached prefix:
// a prefix-cache hit, the tail of a chunked prompt), the key range is split across CTAs that
// write unnormalised partial outputs and their (max, sum), and a merge kernel combines them.
#pragma once

#include <cstdint>

#include "kernels/cuda/attention_prefill_epilogue.cuh"
#include "kernels/cuda/backend_common.cuh"

namespace ds::cuda::ops {
namespace {

template <int D, bool kBf16Pool>
__global__ void __launch_bounds__(kThreads, kCtasPerSm) prefill_attention_kernel(Params p) {
  using Cta = PrefillCta<D, kBf16Pool>;
  constexpr int kRegions = Cta::kRegions;
  extern __shared__ uint8_t smem_raw[];
  Cta cta(p, smem_raw);
  wait_for_previous_kernel();
  load_q_rows<D>(p, cta.tid, cta.r0, cta.h, cta.G, cta.sm.q());
  cta.find_rows();
  float o[kRegions][32];
#pragma unroll
  for (int c = 0; c < kRegions; ++c)
#pragma unroll
    for (int i = 0; i < 32; ++i) o[c][i] = 0.0f;
  RowStats st;

  // The pipeline (FlashAttention-3's within-warpgroup overlap): iteration kt issues S(kt + 1)
  // and P(kt) V(kt) together, then computes the softmax of S(kt + 1) while P V runs on the
  // tensor cores, and rescales O once P V is in. The prologue loads K and V of the first tile
  // and K of the second, and turns S of the first tile into P.
  const int32_t kt_begin = cta.kt_begin, kt_end = cta.kt_end;
  uint32_t pa[kKeys / 16][4];
  if (kt_begin < kt_end) {
    for (int32_t t = kt_begin; t < min(kt_begin + 3, kt_end); ++t) cta.load_rows(t);
    __syncthreads();
    cta.load_k(kt_begin);
    cta.load_v(kt_begin);
    cta.load_k(kt_begin + 1);
    cta.loads_landed();
    float s[32];
    detail::wgmma_fence();
    cta.issue_s(s, kt_begin);
    detail::wgmma_wait<0>();
    detail::wgmma_hold(s);
    float alpha_a, alpha_b;
    softmax(cta, st, s, kt_begin, pa, alpha_a, alpha_b);  // O is 0: nothing to rescale
  }
  // wgmma's issue and waits stay out of branches the compiler cannot prove uniform across the
  // warpgroup (it serialises them otherwise): the last tile is peeled off, and O is rescaled
  // every tile.
  int32_t kt = kt_begin;
  for (; kt + 1 < kt_end; ++kt) {
    // Rows of tile kt + 2 (its K loads below; the prologue did the first iteration's); the
    // slot of tile kt + 2 last held tile kt - 2's, whose loads were issued two barriers ago.
    if (kt > kt_begin && kt + 2 < kt_end) cta.load_rows(kt + 2);
    // K(kt + 1) and V(kt) in; K stage kt & 1 and V stage (kt + 1) & 1 free: every warpgroup
    // has waited for its S(kt) (in the prologue, for the first tile) and its P V(kt - 1).
    cta.loads_landed();
    float s[32];
    detail::wgmma_fence();
    cta.issue_s(s, kt + 1);
    cta.issue_pv(o, pa, kt);
    cta.load_k(kt + 2);
    cta.load_v(kt + 1);
    float alpha_a, alpha_b;
    uint32_t pn[kKeys / 16][4];
    detail::wgmma_wait<1>();
    detail::wgmma_hold(s);
    softmax(cta, st, s, kt + 1, pn, alpha_a, alpha_b);
    detail::wgmma_wait<0>();
#pragma unroll
    for (int c = 0; c < kRegions; ++c) detail::wgmma_hold(o[c]);
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j) detail::wgmma_hold(pa[j]);  // read by P V until the wait
    rescale(o, alpha_a, alpha_b);
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) pa[j][i] = pn[j][i];
  }
  if (kt < kt_end) {
    if (kt > kt_begin) cta.loads_landed();  // V(kt) in
    detail::wgmma_fence();
    cta.issue_pv(o, pa, kt);
    detail::wgmma_wait<0>();
#pragma unroll
    for (int c = 0; c < kRegions; ++c) detail::wgmma_hold(o[c]);
  }
  write_rows(cta, o, st);
}

// One block per (row, KV head): the splits' partial outputs weighted by exp2(m_s - max).
template <int D>
__global__ void prefill_attention_merge_kernel(Params p) {
  const PrefillAttention& a = p.a;
  const int64_t R = blockIdx.x;
  const int32_t h = static_cast<int32_t>(blockIdx.y), G = p.group;
  wait_for_previous_kernel();
  float mx = -INFINITY;
  for (int s = 0; s < p.n_splits; ++s)
    mx = fmaxf(mx, p.part_ml[((static_cast<int64_t>(s) * a.n_kv_heads + h) * p.rows + R) * 2]);
  const float base = mx == -INFINITY ? 0.0f : mx;
  float acc[D / 64] = {};
  float l = 0.0f;
  for (int s = 0; s < p.n_splits; ++s) {
    const int64_t prow = (static_cast<int64_t>(s) * a.n_kv_heads + h) * p.rows + R;
    const float m = p.part_ml[prow * 2];
    if (m == -INFINITY) continue;  // a split with no visible key wrote no output
    const float w = exp2f(m - base);
    l += w * p.part_ml[prow * 2 + 1];
#pragma unroll
    for (int i = 0; i < D / 64; ++i) acc[i] += w * p.part_o[prow * D + threadIdx.x + 64 * i];
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  const int64_t t = R / G, head = static_cast<int64_t>(h) * G + R % G;
  const int64_t off = (t * a.n_q_heads + head) * D;
#pragma unroll
  for (int i = 0; i < D / 64; ++i) {
    const int64_t e = off + threadIdx.x + 64 * i;
    if (a.out_type == DType::bf16)
      static_cast<uint16_t*>(a.out)[e] = detail::f32_to_bf16_bits(acc[i] * inv);
    else
      static_cast<float*>(a.out)[e] = acc[i] * inv;
  }
}

}  // namespace
}  // namespace ds::cuda::ops
