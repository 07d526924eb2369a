// The end of the paged prefill attention (attention_prefill.cuh): a thread's two rows of O,
// normalised and written (bf16 or f32), or, when the key range is split across CTAs, written
// unnormalised with their (max, sum) for the merge kernel, which combines the splits. Included
// by attention_prefill.cu only.
#pragma once

#include <cstdint>

#include "kernels/cuda/attention_prefill_tile.cuh"

namespace ds::cuda::ops {
namespace {

template <class Cta, int kRegions>
__device__ __forceinline__ void write_rows(const Cta& cta, const float (&o)[kRegions][32], RowStats st) {
  constexpr int D = 64 * kRegions;
  const Params& p = cta.p;
  const PrefillAttention& a = p.a;
  const int lane = cta.lane;
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    st.l_a += __shfl_xor_sync(0xffffffffu, st.l_a, off);
    st.l_b += __shfl_xor_sync(0xffffffffu, st.l_b, off);
  }
  const int col = 2 * (lane % 4);
  const int64_t rows_ab[2] = {cta.row_a, cta.row_b};
  const float m_ab[2] = {st.m_a, st.m_b}, l_ab[2] = {st.l_a, st.l_b};
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t R = rows_ab[half];
    if (R >= p.rows) continue;
    if (p.n_splits > 1) {
      const int64_t prow = (static_cast<int64_t>(cta.split) * a.n_kv_heads + cta.h) * p.rows + R;
      float* dst = p.part_o + prow * D;
#pragma unroll
      for (int c = 0; c < kRegions; ++c)
#pragma unroll
        for (int i = 0; i < 8; ++i)
          *reinterpret_cast<float2*>(dst + 64 * c + 8 * i + col) =
              make_float2(o[c][4 * i + 2 * half], o[c][4 * i + 2 * half + 1]);
      if (lane % 4 == 0) *reinterpret_cast<float2*>(p.part_ml + prow * 2) = make_float2(m_ab[half], l_ab[half]);
      continue;
    }
    const float inv = l_ab[half] > 0.0f ? 1.0f / l_ab[half] : 0.0f;
    const int64_t t = R / cta.G, head = static_cast<int64_t>(cta.h) * cta.G + R % cta.G;
    const int64_t off = (t * a.n_q_heads + head) * D;
#pragma unroll
    for (int c = 0; c < kRegions; ++c)
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float x0 = o[c][4 * i + 2 * half] * inv, x1 = o[c][4 * i + 2 * half + 1] * inv;
        const int64_t e = off + 64 * c + 8 * i + col;
        if (a.out_type == DType::bf16)
          *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(a.out) + e) = pack_bf16(x0, x1);
        else
          *reinterpret_cast<float2*>(static_cast<float*>(a.out) + e) = make_float2(x0, x1);
      }
  }
}

}  // namespace
}  // namespace ds::cuda::ops
