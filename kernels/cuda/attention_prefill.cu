// Paged prefill attention in one FlashAttention-style kernel: a chunk's queries against its
// sequence's K/V read straight from the paged pool, online softmax in registers, no score
// matrix and no gather pass.
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
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/decode_tc_ptx.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace ds::cuda::ops {
namespace {

constexpr int kWarps = 8;
constexpr int kCtasPerSm = 1;
constexpr int kRows = 16 * kWarps;  // query rows per CTA
constexpr int kKeys = 64;  // keys per tile
constexpr int kThreads = 32 * kWarps;
constexpr int kRowSlots = 4;  // pool rows of this many tiles are held at once (a ring; a power of 2)
constexpr float kLog2e = 1.4426950408889634f;

struct Params {
  PrefillAttention a;
  int32_t group;       // query heads per KV head
  int64_t rows;        // n_tokens * group
  int32_t n_splits;
  float scale_log2;    // softmax scale in the exp2 domain
  float* part_o;       // [n_splits, n_kv, rows, D] unnormalised, when n_splits > 1
  float* part_ml;      // [n_splits, n_kv, rows, 2]: running max (log2 domain) and sum
};

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The pool row of each key of the tile starting at k0 (KV head h), -1 at or past key_end: one
// thread per key, so the loads below need no division by the block size.
__device__ __forceinline__ void tile_rows(const PrefillAttention& a, int32_t k0, int32_t key_end, int32_t h,
                                          int64_t* rows) {
  if (threadIdx.x < kKeys) {
    const int32_t p = k0 + static_cast<int32_t>(threadIdx.x);
    rows[threadIdx.x] =
        p < key_end ? (static_cast<int64_t>(a.block_table[p / a.block_size]) * a.block_size + p % a.block_size) *
                              a.n_kv_heads + h
                    : -1;
  }
}

// Elements 8c .. 8c + 7 of a K/V row of type t (not bf16: that one is copied as it is). The
// quantised blocks hold 32 elements, so the eight share one scale.
__device__ __forceinline__ void widen8(DType t, const uint8_t* row, int c, float (&x)[8]) {
  switch (t) {
    case DType::f32: {
      const float4 a = reinterpret_cast<const float4*>(row)[2 * c], b = reinterpret_cast<const float4*>(row)[2 * c + 1];
      x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
      return;
    }
    case DType::bf16:
    case DType::f16: {
      const uint4 u = reinterpret_cast<const uint4*>(row)[c];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const uint32_t h = (w[e / 2] >> (16 * (e % 2))) & 0xffffu;
        x[e] = t == DType::bf16 ? detail::bf16_bits_to_f32(h) : detail::f16_bits_to_f32(h);
      }
      return;
    }
    case DType::q8_0: {
      const uint8_t* blk = row + 34 * (c / 4);
      const float d = detail::f16_bits_to_f32(detail::load_u16(blk));
      const uint8_t* q = blk + 2 + 8 * (c % 4);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = d * static_cast<float>(static_cast<int8_t>(q[e]));
      return;
    }
    case DType::q4_0: {
      const uint8_t* blk = row + 18 * (c / 4);
      const float d = detail::f16_bits_to_f32(detail::load_u16(blk));
      const int j0 = 8 * (c % 4);  // elements j0 .. j0 + 7: low nibbles of bytes j0.. (j0 < 16), else high of j0 - 16..
      const uint8_t* q = blk + 2 + (j0 & 15);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = d * static_cast<float>((j0 < 16 ? (q[e] & 0x0F) : (q[e] >> 4)) - 8);
      return;
    }
  }
}

// A tile of keys (pool rows `rows`, from tile_rows) into a swizzled bf16 tile (wgmma.cuh's
// layout); absent keys are 0.
template <int D, bool kBf16Pool>
__device__ __forceinline__ void load_kv_tile(const void* pool, DType type, int64_t row_bytes, const int64_t* rows,
                                             uint8_t* tile) {
  // Each thread copies one 16-byte column chunk of every kRowsPerPass-th key.
  constexpr int kChunks = D / 8, kRowsPerPass = kThreads / kChunks;
  const int c = static_cast<int>(threadIdx.x) % kChunks, j0 = static_cast<int>(threadIdx.x) / kChunks;
#pragma unroll
  for (int m = 0; m < kKeys / kRowsPerPass; ++m) {
    const int j = j0 + m * kRowsPerPass;
    const int64_t row = rows[j];
    if constexpr (kBf16Pool) {
      const auto* src = static_cast<const uint8_t*>(pool) + (row >= 0 ? row * D * 2 + c * 16 : 0);
      detail::cp_async<16>(detail::smem_addr(tile + detail::sw128_offset<kKeys>(j, c)), src, row >= 0 ? 16 : 0);
    } else {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (row >= 0) {
        float x[8];
        widen8(type, static_cast<const uint8_t*>(pool) + row * row_bytes, c, x);
        v = make_uint4(pack_bf16(x[0], x[1]), pack_bf16(x[2], x[3]), pack_bf16(x[4], x[5]), pack_bf16(x[6], x[7]));
      }
      *reinterpret_cast<uint4*>(tile + detail::sw128_offset<kKeys>(j, c)) = v;
    }
  }
}

template <int D, bool kBf16Pool>
__global__ void __launch_bounds__(kThreads, kCtasPerSm) prefill_attention_kernel(Params p) {
  constexpr int kRegions = D / 64;                  // 64-column regions of a swizzled tile
  constexpr int kQBytes = kRows * D * 2, kTileBytes = kKeys * D * 2;
  extern __shared__ uint8_t smem_raw[];
  // The swizzle is a function of the shared address: regions start at 1024-byte multiples.
  uint8_t* smem = smem_raw + ((1024 - (detail::smem_addr(smem_raw) & 1023)) & 1023);
  uint8_t* q_s = smem;
  // Two K stages and two V stages after Q: tile t's K and V sit in stage t & 1 of each. An
  // iteration reads K(kt + 1) and V(kt) while K(kt + 2) and V(kt + 1) load into the others.
  auto k_tile = [&](int32_t t) { return smem + kQBytes + kTileBytes * (t & 1); };
  auto v_tile = [&](int32_t t) { return smem + kQBytes + kTileBytes * (2 + (t & 1)); };
  // Pool rows of tile t (tile_rows) in slot t & (kRowSlots - 1): a slot is rewritten two
  // iterations after its V load was issued.
  auto rows_s = reinterpret_cast<int64_t(*)[kKeys]>(smem + kQBytes + 4 * kTileBytes);  // kRowSlots of them
  const PrefillAttention& a = p.a;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = warp / 4;
  const int64_t r0 = (static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x) * kRows;  // longest rows first
  const int32_t h = static_cast<int32_t>(blockIdx.y), split = static_cast<int32_t>(blockIdx.z);
  const int32_t G = p.group;

  // This CTA's keys, and its share of them when the key range is split.
  const int64_t last_row = min(r0 + kRows, p.rows) - 1;
  const int64_t key_end = a.n_cached + last_row / G + 1;
  const int64_t n_tiles = (key_end + kKeys - 1) / kKeys;
  const int64_t per_split = (n_tiles + p.n_splits - 1) / p.n_splits;
  // Positions fit 32 bits (a sequence is at most max-ctx long); in-loop arithmetic stays 32-bit
  // to keep registers for the accumulators.
  const int32_t kt_begin = static_cast<int32_t>(min(n_tiles, split * per_split));
  const int32_t kt_end = static_cast<int32_t>(min(n_tiles, kt_begin + per_split));
  const int32_t min_limit = static_cast<int32_t>(a.n_cached + r0 / G);  // the first row's last key: tiles past it need the mask

  wait_for_previous_kernel();
  // Q rows (f32 in memory) to bf16.
  for (int i = tid; i < kRows * D / 8; i += kThreads) {
    const int r = i / (D / 8), c = i % (D / 8);
    const int64_t R = r0 + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (R < p.rows) {
      const int64_t t = R / G, head = static_cast<int64_t>(h) * G + R % G;
      const float4* src = reinterpret_cast<const float4*>(a.q + (t * a.n_q_heads + head) * D + c * 8);
      const float4 x = src[0], y = src[1];
      v = make_uint4(pack_bf16(x.x, x.y), pack_bf16(x.z, x.w), pack_bf16(y.x, y.y), pack_bf16(y.z, y.w));
    }
    *reinterpret_cast<uint4*>(q_s + detail::sw128_offset<kRows>(r, c)) = v;
  }
  const int32_t kend = static_cast<int32_t>(key_end);
  auto load_k = [&](int32_t t) {
    if (t < kt_end) load_kv_tile<D, kBf16Pool>(a.k_pool, a.k_type, a.k_row_bytes, rows_s[t & (kRowSlots - 1)], k_tile(t));
  };
  auto load_v = [&](int32_t t) {
    if (t < kt_end) load_kv_tile<D, kBf16Pool>(a.v_pool, a.v_type, a.v_row_bytes, rows_s[t & (kRowSlots - 1)], v_tile(t));
  };
  // Everything loaded so far in, visible to wgmma (the async proxy) and to every warpgroup.
  auto loads_landed = [&] {
    if constexpr (kBf16Pool) {
      detail::cp_async_commit();
      detail::cp_async_wait<0>();
    }
    detail::fence_proxy_async_shared();
    __syncthreads();
  };

  // Rows this thread accumulates: lane / 4 and lane / 4 + 8 of its warp's 16 (warp w of the
  // CTA owns rows 16w .. 16w + 15; warpgroup g = w / 4 multiplies rows 64g .. 64g + 63).
  const int64_t row_a = r0 + warp * 16 + lane / 4, row_b = row_a + 8;
  const int32_t lim_a = row_a < p.rows ? static_cast<int32_t>(a.n_cached + row_a / G) : -1;
  const int32_t lim_b = row_b < p.rows ? static_cast<int32_t>(a.n_cached + row_b / G) : -1;
  // o[c][4i + e]: column 64c + 8i + 2 (lane % 4) + e % 2 of row a (e < 2) or b.
  float o[kRegions][32];
#pragma unroll
  for (int c = 0; c < kRegions; ++c)
#pragma unroll
    for (int i = 0; i < 32; ++i) o[c][i] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
  const uint32_t q_base = detail::smem_addr(q_s) + wg * 64 * 128;

  // S = Q K(t)ᵀ for this warpgroup's 64 rows, issued and committed as one wgmma group;
  // s[4n + e] in o's layout with 8-key tiles n.
  auto issue_s = [&](float (&s)[32], int32_t t) {
    const uint32_t k_base = detail::smem_addr(k_tile(t));
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t off = (ks % 4) * 32;  // the k step's 32 bytes within the 128-byte rows
      const uint64_t qd = detail::wgmma_desc_sw128(q_base + (ks / 4) * kRows * 128 + off, 16, 1024);
      const uint64_t kd = detail::wgmma_desc_sw128(k_base + (ks / 4) * kKeys * 128 + off, 16, 1024);
      detail::wgmma_m64n64k16_ss(s, qd, kd, ks > 0);
    }
    detail::wgmma_commit();
  };
  // The causal mask and online softmax of tile t's scores: s becomes P (as bf16 A fragments in
  // pa: two adjacent 8-key tiles per 16-key step), the running max and sum move on, and the
  // factor O must be scaled by before P V(t) is added is returned through alpha.
  auto softmax = [&](float (&s)[32], int32_t t, uint32_t (&pa)[kKeys / 16][4], float& alpha_a, float& alpha_b) {
    const int32_t k0 = t * kKeys;
    if (k0 + kKeys - 1 > min_limit) {
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
        const int32_t key = k0 + 8 * n + 2 * (lane % 4);
        if (key > lim_a) s[4 * n] = -INFINITY;
        if (key + 1 > lim_a) s[4 * n + 1] = -INFINITY;
        if (key > lim_b) s[4 * n + 2] = -INFINITY;
        if (key + 1 > lim_b) s[4 * n + 3] = -INFINITY;
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
    const float mn_a = fmaxf(m_a, mx_a * p.scale_log2), mn_b = fmaxf(m_b, mx_b * p.scale_log2);
    // A row with no visible key yet keeps max -inf; subtracting 0 then keeps every term 0.
    const float base_a = mn_a == -INFINITY ? 0.0f : mn_a, base_b = mn_b == -INFINITY ? 0.0f : mn_b;
    alpha_a = detail::fast_exp2(m_a - base_a);
    alpha_b = detail::fast_exp2(m_b - base_b);
    m_a = mn_a;
    m_b = mn_b;
    float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      s[4 * n] = detail::fast_exp2(fmaf(s[4 * n], p.scale_log2, -base_a));
      s[4 * n + 1] = detail::fast_exp2(fmaf(s[4 * n + 1], p.scale_log2, -base_a));
      s[4 * n + 2] = detail::fast_exp2(fmaf(s[4 * n + 2], p.scale_log2, -base_b));
      s[4 * n + 3] = detail::fast_exp2(fmaf(s[4 * n + 3], p.scale_log2, -base_b));
      sum_a += s[4 * n] + s[4 * n + 1];
      sum_b += s[4 * n + 2] + s[4 * n + 3];
    }
    l_a = l_a * alpha_a + sum_a;
    l_b = l_b * alpha_b + sum_b;
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j) {
      pa[j][0] = pack_bf16(s[8 * j], s[8 * j + 1]);
      pa[j][1] = pack_bf16(s[8 * j + 2], s[8 * j + 3]);
      pa[j][2] = pack_bf16(s[8 * j + 4], s[8 * j + 5]);
      pa[j][3] = pack_bf16(s[8 * j + 6], s[8 * j + 7]);
    }
  };
  auto rescale = [&](float alpha_a, float alpha_b) {
#pragma unroll
    for (int c = 0; c < kRegions; ++c)
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        o[c][4 * i] *= alpha_a;
        o[c][4 * i + 1] *= alpha_a;
        o[c][4 * i + 2] *= alpha_b;
        o[c][4 * i + 3] *= alpha_b;
      }
  };

  // The pipeline (FlashAttention-3's within-warpgroup overlap): iteration kt issues S(kt + 1)
  // and P(kt) V(kt) together, then computes the softmax of S(kt + 1) while P V runs on the
  // tensor cores, and rescales O once P V is in. The prologue loads K and V of the first tile
  // and K of the second, and turns S of the first tile into P.
  uint32_t pa[kKeys / 16][4];
  if (kt_begin < kt_end) {
    for (int32_t t = kt_begin; t < min(kt_begin + 3, kt_end); ++t) tile_rows(a, t * kKeys, kend, h, rows_s[t & (kRowSlots - 1)]);
    __syncthreads();
    load_k(kt_begin);
    load_v(kt_begin);
    load_k(kt_begin + 1);
    loads_landed();
    float s[32];
    detail::wgmma_fence();
    issue_s(s, kt_begin);
    detail::wgmma_wait<0>();
    detail::wgmma_hold(s);
    float alpha_a, alpha_b;
    softmax(s, kt_begin, pa, alpha_a, alpha_b);  // O is 0: nothing to rescale
  }
  // P(kt) V(kt) as one wgmma group.
  auto issue_pv = [&](int32_t kt) {
    const uint32_t v_base = detail::smem_addr(v_tile(kt));
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j)
#pragma unroll
      for (int c = 0; c < kRegions; ++c)
        detail::wgmma_m64n64k16_rs_bt(
            o[c], pa[j], detail::wgmma_desc_sw128(v_base + c * kKeys * 128 + j * 16 * 128, kKeys * 128, 1024));
    detail::wgmma_commit();
  };
  // wgmma's issue and waits stay out of branches the compiler cannot prove uniform across the
  // warpgroup (it serialises them otherwise): the last tile is peeled off, and O is rescaled
  // every tile.
  int32_t kt = kt_begin;
  for (; kt + 1 < kt_end; ++kt) {
    // Rows of tile kt + 2 (its K loads below; the prologue did the first iteration's); the
    // slot of tile kt + 2 last held tile kt - 2's, whose loads were issued two barriers ago.
    if (kt > kt_begin && kt + 2 < kt_end) tile_rows(a, (kt + 2) * kKeys, kend, h, rows_s[(kt + 2) & (kRowSlots - 1)]);
    // K(kt + 1) and V(kt) in; K stage kt & 1 and V stage (kt + 1) & 1 free: every warpgroup
    // has waited for its S(kt) (in the prologue, for the first tile) and its P V(kt - 1).
    loads_landed();
    float s[32];
    detail::wgmma_fence();
    issue_s(s, kt + 1);
    issue_pv(kt);
    load_k(kt + 2);
    load_v(kt + 1);
    float alpha_a, alpha_b;
    uint32_t pn[kKeys / 16][4];
    detail::wgmma_wait<1>();
    detail::wgmma_hold(s);
    softmax(s, kt + 1, pn, alpha_a, alpha_b);
    detail::wgmma_wait<0>();
#pragma unroll
    for (int c = 0; c < kRegions; ++c) detail::wgmma_hold(o[c]);
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j) detail::wgmma_hold(pa[j]);  // read by P V until the wait
    rescale(alpha_a, alpha_b);
#pragma unroll
    for (int j = 0; j < kKeys / 16; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) pa[j][i] = pn[j][i];
  }
  if (kt < kt_end) {
    if (kt > kt_begin) loads_landed();  // V(kt) in
    detail::wgmma_fence();
    issue_pv(kt);
    detail::wgmma_wait<0>();
#pragma unroll
    for (int c = 0; c < kRegions; ++c) detail::wgmma_hold(o[c]);
  }

#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l_a += __shfl_xor_sync(0xffffffffu, l_a, off);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, off);
  }
  const int col = 2 * (lane % 4);
  const int64_t rows_ab[2] = {row_a, row_b};
  const float m_ab[2] = {m_a, m_b}, l_ab[2] = {l_a, l_b};
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t R = rows_ab[half];
    if (R >= p.rows) continue;
    if (p.n_splits > 1) {
      const int64_t prow = (static_cast<int64_t>(split) * a.n_kv_heads + h) * p.rows + R;
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
    const int64_t t = R / G, head = static_cast<int64_t>(h) * G + R % G;
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

template <int D, bool kBf16Pool>
void launch(const Params& p, const Stream& stream) {
  // Q, two K and two V tiles, the ring of pool rows, and room to align the tiles to 1024 bytes.
  constexpr size_t smem = static_cast<size_t>(kRows + 4 * kKeys) * D * 2 + kRowSlots * kKeys * sizeof(int64_t) + 1024;
  static const bool attr_set = [] {
    check_cuda(cudaFuncSetAttribute(prefill_attention_kernel<D, kBf16Pool>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
               "prefill_attention: shared memory attribute");
    return true;
  }();
  (void)attr_set;
  const dim3 grid(static_cast<unsigned>((p.rows + kRows - 1) / kRows), static_cast<unsigned>(p.a.n_kv_heads),
                  static_cast<unsigned>(p.n_splits));
  launch_dependent("prefill_attention kernel", prefill_attention_kernel<D, kBf16Pool>, grid, dim3(kThreads), smem,
                   stream, p);
  if (p.n_splits > 1)
    launch_dependent("prefill_attention merge kernel", prefill_attention_merge_kernel<D>,
                     dim3(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.a.n_kv_heads)), dim3(64), 0, stream,
                     p);
}

}  // namespace

int32_t prefill_attention_splits(const PrefillAttention& a, int32_t n_sms) {
  const int64_t group = a.n_q_heads / a.n_kv_heads;
  const int64_t ctas = (a.n_tokens * group + kRows - 1) / kRows * a.n_kv_heads;
  const int64_t want = kCtasPerSm * static_cast<int64_t>(n_sms);
  if (ctas >= want) return 1;
  // At least 4 key tiles per split, so the merge stays small next to the attention itself.
  const int64_t tiles = (a.n_cached + a.n_tokens + kKeys - 1) / kKeys;
  return static_cast<int32_t>(std::clamp<int64_t>(std::min((want + ctas - 1) / ctas, tiles / 4), 1, 32));
}

size_t prefill_attention_scratch_floats(const PrefillAttention& a, int32_t n_splits) {
  if (n_splits <= 1) return 0;
  const int64_t rows = a.n_tokens * (a.n_q_heads / a.n_kv_heads);
  return static_cast<size_t>(n_splits) * static_cast<size_t>(a.n_kv_heads * rows) * (a.head_dim + 2);
}

void prefill_attention(const PrefillAttention& a, int32_t n_splits, float* scratch, Stream stream) {
  if (a.n_tokens == 0) return;
  if (a.n_kv_heads <= 0 || a.n_q_heads % a.n_kv_heads != 0)
    throw std::invalid_argument("cuda backend: prefill_attention: query heads not a multiple of KV heads");
  if (a.n_kv_heads > 65535 || n_splits < 1 || n_splits > 65535)
    throw std::invalid_argument("cuda backend: prefill_attention: too many KV heads or splits");
  Params p;
  p.a = a;
  p.group = a.n_q_heads / a.n_kv_heads;
  p.rows = a.n_tokens * p.group;
  p.n_splits = n_splits;
  p.scale_log2 = a.scale * kLog2e;
  p.part_o = scratch;
  p.part_ml = scratch ? scratch + static_cast<size_t>(n_splits) * static_cast<size_t>(a.n_kv_heads * p.rows) * a.head_dim
                      : nullptr;
  if (n_splits > 1 && !scratch) throw std::invalid_argument("cuda backend: prefill_attention: split without scratch");
  if (p.rows > 0x7fffffffLL * kRows) throw std::invalid_argument("cuda backend: prefill_attention: chunk too long");
  const bool bf16_pool = a.k_type == DType::bf16 && a.v_type == DType::bf16;
  switch (a.head_dim) {
    case 128:
      return bf16_pool ? launch<128, true>(p, stream) : launch<128, false>(p, stream);
    case 256:
      return bf16_pool ? launch<256, true>(p, stream) : launch<256, false>(p, stream);
    default:
      throw std::invalid_argument("cuda backend: prefill_attention: head_dim must be 128 or 256, got " +
                                  std::to_string(a.head_dim));
  }
}

}  // namespace ds::cuda::ops
