// One key tile of the paged prefill attention kernel (attention_prefill.cuh), for a
// warpgroup's 64 rows: S = Q Kᵀ and O += P V issued as wgmma groups (wgmma.cuh), and the
// causal mask and online softmax that turn S into P. Included by attention_prefill.cu only.
#pragma once

#include <cstdint>

#include "kernels/cuda/attention_prefill_loads.cuh"
#include "kernels/cuda/ex2_approx.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace ds::cuda::ops {
namespace {

// A CTA of the kernel: 128 query rows r0 .. of KV head h, its share of the key tiles
// [kt_begin, kt_end) (split `split` of the key range), and where each thread's two rows stop
// seeing keys.
template <int D, bool kBf16Pool>
struct PrefillCta {
  static constexpr int kRegions = D / 64;
  const Params& p;
  PrefillSmem<D> sm;
  int tid, warp, lane, wg;
  int64_t r0;
  int32_t h, split, G;
  int32_t kt_begin, kt_end;
  int32_t min_limit;  // the first row's last key: tiles past it need the mask
  int32_t kend;       // the CTA's keys end here
  // Rows this thread accumulates: lane / 4 and lane / 4 + 8 of its warp's 16 (warp w of the
  // CTA owns rows 16w .. 16w + 15; warpgroup g = w / 4 multiplies rows 64g .. 64g + 63), and
  // their last visible keys (-1: a row past the chunk).
  int64_t row_a, row_b;
  int32_t lim_a, lim_b;
  uint32_t q_base;  // the warpgroup's rows of Q

  __device__ __forceinline__ PrefillCta(const Params& p_, uint8_t* smem_raw)
      : p(p_),
        sm(smem_raw),
        tid(static_cast<int>(threadIdx.x)),
        warp(tid / 32),
        lane(tid % 32),
        wg(warp / 4),
        r0((static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x) * kRows),  // longest rows first
        h(static_cast<int32_t>(blockIdx.y)),
        split(static_cast<int32_t>(blockIdx.z)),
        G(p_.group) {
    const PrefillAttention& a = p.a;
    // This CTA's keys, and its share of them when the key range is split.
    const int64_t last_row = min(r0 + kRows, p.rows) - 1;
    const int64_t key_end = a.n_cached + last_row / G + 1;
    const int64_t n_tiles = (key_end + kKeys - 1) / kKeys;
    const int64_t per_split = (n_tiles + p.n_splits - 1) / p.n_splits;
    // Positions fit 32 bits (a sequence is at most max-ctx long); in-loop arithmetic stays
    // 32-bit to keep registers for the accumulators.
    kt_begin = static_cast<int32_t>(min(n_tiles, split * per_split));
    kt_end = static_cast<int32_t>(min(n_tiles, kt_begin + per_split));
    min_limit = static_cast<int32_t>(a.n_cached + r0 / G);
    kend = static_cast<int32_t>(key_end);
  }
  // The thread's rows, once Q is in (kept out of the constructor, which runs before the Q
  // loads: computed there they would be live across them).
  __device__ __forceinline__ void find_rows() {
    const PrefillAttention& a = p.a;
    row_a = r0 + warp * 16 + lane / 4;
    row_b = row_a + 8;
    lim_a = row_a < p.rows ? static_cast<int32_t>(a.n_cached + row_a / G) : -1;
    lim_b = row_b < p.rows ? static_cast<int32_t>(a.n_cached + row_b / G) : -1;
    q_base = detail::smem_addr(sm.q()) + wg * 64 * 128;
  }

  __device__ __forceinline__ void load_rows(int32_t t) const { tile_rows(p.a, t * kKeys, kend, h, sm.rows(t)); }
  __device__ __forceinline__ void load_k(int32_t t) const {
    if (t < kt_end) load_kv_tile<D, kBf16Pool>(p.a.k_pool, p.a.k_type, p.a.k_row_bytes, sm.rows(t), sm.k_tile(t));
  }
  __device__ __forceinline__ void load_v(int32_t t) const {
    if (t < kt_end) load_kv_tile<D, kBf16Pool>(p.a.v_pool, p.a.v_type, p.a.v_row_bytes, sm.rows(t), sm.v_tile(t));
  }
  // Everything loaded so far in, visible to wgmma (the async proxy) and to every warpgroup.
  __device__ __forceinline__ void loads_landed() const {
    if constexpr (kBf16Pool) {
      detail::cp_async_commit();
      detail::cp_async_wait<0>();
    }
    detail::fence_proxy_async_shared();
    __syncthreads();
  }

  // S = Q K(t)ᵀ for this warpgroup's 64 rows, issued and committed as one wgmma group;
  // s[4n + e] in o's layout with 8-key tiles n.
  __device__ __forceinline__ void issue_s(float (&s)[32], int32_t t) const {
    const uint32_t k_base = detail::smem_addr(sm.k_tile(t));
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t off = (ks % 4) * 32;  // the k step's 32 bytes within the 128-byte rows
      const uint64_t qd = detail::wgmma_desc_sw128(q_base + (ks / 4) * kRows * 128 + off, 16, 1024);
      const uint64_t kd = detail::wgmma_desc_sw128(k_base + (ks / 4) * kKeys * 128 + off, 16, 1024);
      detail::wgmma_m64n64k16_ss(s, qd, kd, ks > 0);
    }
    detail::wgmma_commit();
  }
  // O += P(kt) V(kt) as one wgmma group; o[c][4i + e]: column 64c + 8i + 2 (lane % 4) + e % 2
  // of row a (e < 2) or b.
  __device__ __forceinline__ void issue_pv(float (&o)[kRegions][32], uint32_t (&pa)[kKeys / 16][4],
                                           int32_t kt) const {
    const uint32_t v_base = detail::smem_addr(sm.v_tile(kt));
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j)
#pragma unroll
      for (int c = 0; c < kRegions; ++c)
        detail::wgmma_m64n64k16_rs_bt(
            o[c], pa[j], detail::wgmma_desc_sw128(v_base + c * kKeys * 128 + j * 16 * 128, kKeys * 128, 1024));
    detail::wgmma_commit();
  }
};

// The running max (log2 domain) and sum of a thread's two rows.
struct RowStats {
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
};

// The causal mask and online softmax of tile t's scores: s becomes P (as bf16 A fragments in
// pa: two adjacent 8-key tiles per 16-key step), the running max and sum move on, and the
// factor O must be scaled by before P V(t) is added is returned through alpha.
template <class Cta>
__device__ __forceinline__ void softmax(const Cta& cta, RowStats& st, float (&s)[32], int32_t t,
                                        uint32_t (&pa)[kKeys / 16][4], float& alpha_a, float& alpha_b) {
  const int lane = cta.lane;
  const int32_t k0 = t * kKeys;
  if (k0 + kKeys - 1 > cta.min_limit) {
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      const int32_t key = k0 + 8 * n + 2 * (lane % 4);
      if (key > cta.lim_a) s[4 * n] = -INFINITY;
      if (key + 1 > cta.lim_a) s[4 * n + 1] = -INFINITY;
      if (key > cta.lim_b) s[4 * n + 2] = -INFINITY;
      if (key + 1 > cta.lim_b) s[4 * n + 3] = -INFINITY;
    }
  }
  // The quad of lanes sharing a row reduces its max.
  float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n) {
    mx_a = fmaxf(mx_a, fmaxf(s[4 * n], s[4 * n + 1]));
    mx_b = fmaxf(mx_b, fmaxf(s[4 * n + 2], s[4 * n + 3]));
  }
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, off));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, off));
  }
  const float mn_a = fmaxf(st.m_a, mx_a * cta.p.scale_log2), mn_b = fmaxf(st.m_b, mx_b * cta.p.scale_log2);
  // A row with no visible key yet keeps max -inf; subtracting 0 then keeps every term 0.
  const float base_a = mn_a == -INFINITY ? 0.0f : mn_a, base_b = mn_b == -INFINITY ? 0.0f : mn_b;
  alpha_a = detail::fast_exp2(st.m_a - base_a);
  alpha_b = detail::fast_exp2(st.m_b - base_b);
  st.m_a = mn_a;
  st.m_b = mn_b;
  float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
  for (int n = 0; n < kKeys / 8; ++n) {
    s[4 * n] = detail::fast_exp2(fmaf(s[4 * n], cta.p.scale_log2, -base_a));
    s[4 * n + 1] = detail::fast_exp2(fmaf(s[4 * n + 1], cta.p.scale_log2, -base_a));
    s[4 * n + 2] = detail::fast_exp2(fmaf(s[4 * n + 2], cta.p.scale_log2, -base_b));
    s[4 * n + 3] = detail::fast_exp2(fmaf(s[4 * n + 3], cta.p.scale_log2, -base_b));
    sum_a += s[4 * n] + s[4 * n + 1];
    sum_b += s[4 * n + 2] + s[4 * n + 3];
  }
  st.l_a = st.l_a * alpha_a + sum_a;
  st.l_b = st.l_b * alpha_b + sum_b;
#pragma unroll
  for (int j = 0; j < kKeys / 16; ++j) {
    pa[j][0] = pack_bf16(s[8 * j], s[8 * j + 1]);
    pa[j][1] = pack_bf16(s[8 * j + 2], s[8 * j + 3]);
    pa[j][2] = pack_bf16(s[8 * j + 4], s[8 * j + 5]);
    pa[j][3] = pack_bf16(s[8 * j + 6], s[8 * j + 7]);
  }
}

template <int kRegions>
__device__ __forceinline__ void rescale(float (&o)[kRegions][32], float alpha_a, float alpha_b) {
#pragma unroll
  for (int c = 0; c < kRegions; ++c)
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      o[c][4 * i] *= alpha_a;
      o[c][4 * i + 1] *= alpha_a;
      o[c][4 * i + 2] *= alpha_b;
      o[c][4 * i + 3] *= alpha_b;
    }
}

}  // namespace
}  // namespace ds::cuda::ops
