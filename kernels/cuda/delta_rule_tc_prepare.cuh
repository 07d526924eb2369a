// The prepare pass of the tensor-core chunked delta rule (delta_rule_tc.cuh), one block per
// (chunk, group of value heads that share a key head), in stages: what depends only on the key
// head -- the q and k loads, their L2 norms and bf16 copies, and the raw products K Kᵀ and
// Q Kᵀ (kept in the mma accumulators) -- is done once for the group; the gates of all its heads
// in parallel; then, head by head, the gated A and P, T = (I + A)^-1, W and U, while the next
// head's v loads (cp.async) behind that work. With GQA (16 key / 32 or 48 value heads) this
// halves or thirds the q/k traffic and the K Kᵀ, Q Kᵀ products of one block per value head,
// and gives the serial phases of each head a load to hide behind. Included by delta_rule_tc.cu
// only.
#pragma once

#include <cstdint>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/delta_rule_tc_fragments.cuh"

namespace ds::cuda::ops::delta {
namespace {

// A prepare block's chunk and heads: value heads j0 .. j0 + group - 1 of key head kh.
struct PrepareBlock {
  DeltaNetChunkItem it;
  int group, j0, kh;
  int64_t key_dim, conv_dim;
  float* scratch;

  __device__ __forceinline__ PrepareBlock(const DeltaNetArgs& a, const DeltaNetChunkItem& item, float* scratch_,
                                          int group_)
      : it(item),
        group(group_),
        j0(static_cast<int>(blockIdx.y) * group_),
        kh(j0 / (a.v_heads / a.k_heads)),
        key_dim(static_cast<int64_t>(a.k_heads) * kD),
        conv_dim(2 * key_dim + static_cast<int64_t>(a.v_heads) * kD),
        scratch(scratch_) {}
  // Head h of the group's scratch.
  __device__ __forceinline__ uint8_t* out_of(const DeltaNetArgs& a, int h) const {
    return scratch_of(scratch, blockIdx.x, a.v_heads, j0 + h);
  }
};

constexpr int kRowsPerWarp = kC / (kThreads / 32);
// Each warp's eight rows of q and k, in registers until their norms.
struct QkRows {
  float4 q[kRowsPerWarp], k[kRowsPerWarp];
};

// T = (I + A)^-1 for the strictly lower triangular A ([C][C] f32 in shared memory), into T
// (lower triangular with a unit diagonal; entries above the diagonal blocks are not written).
// The four 16 x 16 diagonal blocks are inverted by substitution in fp32, a column a thread;
// the blocks below them follow by distance from the diagonal, T_ij = -T_ii sum_{k=j}^{i-1}
// A_ik T_kj (kernel-notes 3.2's block form), as 16 x 16 products on the tensor cores with tf32
// operands (a warp per block and 8-column half; the sum goes through M, the warp's own
// columns of it, as the second product's B operand). tf32's rounding (2^-11) is below that of the bf16 copies of T that W
// and U are made from. The block products on the CUDA cores were ~9% of the layer at 16K
// tokens (docs/bench-log, "The inverse's block products on the tensor cores"); a 64-step
// substitution per column of W and U before them was the prepare pass's bottleneck
// ("Chunked DeltaNet on tensor cores").
__device__ __forceinline__ void invert_unit_lower(const float* A, float* T, float* M) {
  const int tid = threadIdx.x;
  if (tid < kC) {
    const int r0 = kBlk * (tid / kBlk), c = tid % kBlk;
    float x[kBlk];
#pragma unroll
    for (int r = 0; r < kBlk; ++r) {
      float acc = r == c ? 1.0f : 0.0f;
#pragma unroll
      for (int k = 0; k < r; ++k) acc -= A[(r0 + r) * kAT + r0 + k] * x[k];
      x[r] = acc;  // zero above the diagonal: x_k = 0 for k < c
      T[(r0 + r) * kAT + r0 + c] = acc;
    }
  }
  __syncthreads();
  // Warp w: block column bj = w / 2 of this distance, output columns 8 (w % 2) .. + 7.
  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
  const int bj = warp >> 1, n0 = 8 * (warp & 1);
  // The A operand (rows r0 + g, + 8; columns k0 + q, + 4) of a [m][k] f32 tile `stride` floats
  // a row, and the B operand (rows k0 + q, + 4; column c0 + g).
  auto a_frag = [&](uint32_t(&af)[4], const float* base, int stride, int r0, int k0) {
    af[0] = to_tf32(base[(r0 + g) * stride + k0 + q]);
    af[1] = to_tf32(base[(r0 + g + 8) * stride + k0 + q]);
    af[2] = to_tf32(base[(r0 + g) * stride + k0 + q + 4]);
    af[3] = to_tf32(base[(r0 + g + 8) * stride + k0 + q + 4]);
  };
#pragma unroll 1
  for (int d = 1; d < kC / kBlk; ++d) {
    const bool active = bj < kC / kBlk - d;
    const int bi = bj + d;
    if (active) {  // M_j = sum_k A_ik T_kj
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int k0 = kBlk * bj; k0 < kBlk * bi; k0 += 8) {
        uint32_t af[4];
        a_frag(af, A, kAT, kBlk * bi, k0);
        mma1688_tf32(acc, af, to_tf32(T[(k0 + q) * kAT + kBlk * bj + n0 + g]),
                     to_tf32(T[(k0 + q + 4) * kAT + kBlk * bj + n0 + g]));
      }
      float* m = M + bj * kBlk * kBlk;
      *reinterpret_cast<float2*>(m + g * kBlk + n0 + 2 * q) = make_float2(acc[0], acc[1]);
      *reinterpret_cast<float2*>(m + (g + 8) * kBlk + n0 + 2 * q) = make_float2(acc[2], acc[3]);
    }
    __syncwarp();  // M's columns n0 .. n0 + 7 are this warp's own
    if (active) {  // T_ij = -T_ii M_j
      const float* m = M + bj * kBlk * kBlk;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int k0 = 0; k0 < kBlk; k0 += 8) {
        uint32_t af[4];
        a_frag(af, T + kBlk * bi, kAT, kBlk * bi, k0);
        mma1688_tf32(acc, af, to_tf32(m[(k0 + q) * kBlk + n0 + g]), to_tf32(m[(k0 + q + 4) * kBlk + n0 + g]));
      }
      float* t = T + kBlk * bi * kAT + kBlk * bj + n0 + 2 * q;
      *reinterpret_cast<float2*>(t + g * kAT) = make_float2(-acc[0], -acc[1]);
      *reinterpret_cast<float2*>(t + (g + 8) * kAT) = make_float2(-acc[2], -acc[3]);
    }
    __syncthreads();
  }
}

// v of value head j for the chunk's rows, f32, into Vf by cp.async (padded rows zero-filled).
__device__ __forceinline__ void load_v(float* Vf, const DeltaNetArgs& a, const DeltaNetChunkItem& it, int j) {
  const int64_t key_dim = static_cast<int64_t>(a.k_heads) * kD;
  const int64_t conv_dim = 2 * key_dim + static_cast<int64_t>(a.v_heads) * kD;
  const float* v0 = a.qkv + static_cast<int64_t>(it.row0) * conv_dim + 2 * key_dim + static_cast<int64_t>(j) * kD;
  for (int i = threadIdx.x; i < kC * kD / 4; i += kThreads) {
    const int t = i / (kD / 4), c4 = i % (kD / 4);
    cp_async<16>(smem_addr(Vf) + i * 16, t < it.len ? v0 + static_cast<int64_t>(t) * conv_dim + 4 * c4 : v0,
                 t < it.len ? 16 : 0);
  }
  cp_async_commit();
}

// Each warp's rows of q and k into registers (padded rows zero), issued with v's copies before
// the gates, so the loads overlap the gates' double-precision maths.
__device__ __forceinline__ void load_qk_rows(const DeltaNetArgs& a, const PrepareBlock& b, QkRows& qk) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int t = warp + r * (kThreads / 32);
    qk.q[r] = qk.k[r] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (t < b.it.len) {
      const float* x = a.qkv + (static_cast<int64_t>(b.it.row0) + t) * b.conv_dim;
      qk.q[r] = reinterpret_cast<const float4*>(x + b.kh * kD)[lane];
      qk.k[r] = reinterpret_cast<const float4*>(x + b.key_dim + b.kh * kD)[lane];
    }
  }
}

// The gates of every head of the group into G (gamma, beta, e^gamma, e^(gamma_last - gamma),
// [C] each per head), and e^gamma_last, e^gamma and e^(gamma_last - gamma) to each head's
// scratch. Ends with a barrier.
__device__ __forceinline__ void gates_and_decays(const DeltaNetArgs& a, const PrepareBlock& b, float* G) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Gates, a (token, head) pair a thread: double-precision transcendentals, spread over every
  // warp (and so every scheduler's FP64 units) rather than a warp per head; g waits in gamma's
  // place for the prefix sums.
  for (int p = tid; p < b.group * kC; p += kThreads) {
    const int h = p / kC, t = p % kC;
    float gg = 0.0f, bb = 0.0f;
    if (t < b.it.len) {
      const Gates gt = gates(a, static_cast<int64_t>(b.it.row0) + t, b.j0 + h);
      gg = gt.g;
      bb = gt.beta;
    }
    G[h * 4 * kC + t] = gg;
    G[h * 4 * kC + kC + t] = bb;
  }
  __syncthreads();
  // Their in-chunk prefix sums, a warp per head of the group (two tokens per lane, the sum in
  // double).
  for (int h = warp; h < b.group; h += kThreads / 32) {
    float* gam = G + h * 4 * kC;
    float *egam = gam + 2 * kC, *edec = egam + kC;
    const float g[2] = {gam[2 * lane], gam[2 * lane + 1]};
    const double pair = static_cast<double>(g[0]) + static_cast<double>(g[1]);
    double incl = pair;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const double up = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += up;
    }
    const double excl = incl - pair;
    const float g0 = static_cast<float>(excl + g[0]), g1 = static_cast<float>(incl);
    const float last = __shfl_sync(0xffffffffu, g1, 31);
    gam[2 * lane] = g0;
    gam[2 * lane + 1] = g1;
    egam[2 * lane] = expf(g0);
    egam[2 * lane + 1] = expf(g1);
    edec[2 * lane] = expf(last - g0);
    edec[2 * lane + 1] = expf(last - g1);
    uint8_t* out = b.out_of(a, h);
    if (lane == 0) *reinterpret_cast<float*>(out + kOffDecay) = expf(last);
    *reinterpret_cast<float2*>(out + kOffEg + 8 * lane) = make_float2(egam[2 * lane], egam[2 * lane + 1]);
    *reinterpret_cast<float2*>(out + kOffEd + 8 * lane) = make_float2(edec[2 * lane], edec[2 * lane + 1]);
  }
  __syncthreads();
}

// Rows, a warp each: L2 norms; k and q in bf16 into Kb and Qb (for A, P and W) and to the
// group's scratch (for the scan and output passes). Ends with a barrier.
__device__ __forceinline__ void normalise_qk(const DeltaNetArgs& a, const PrepareBlock& b, const QkRows& qk,
                                             const PrepareSmem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int t = warp + r * (kThreads / 32);
    const float4 qr = qk.q[r], kr = qk.k[r];
    const float sq = warp_sum(qr.x * qr.x + qr.y * qr.y + qr.z * qr.z + qr.w * qr.w);
    const float sk = warp_sum(kr.x * kr.x + kr.y * kr.y + kr.z * kr.z + kr.w * kr.w);
    const float iq = (1.0f / sqrtf(sq + 1e-6f)), ik = 1.0f / sqrtf(sk + 1e-6f), qs = q_scale();
    const float4 qn = make_float4((qr.x * iq) * qs, (qr.y * iq) * qs, (qr.z * iq) * qs, (qr.w * iq) * qs);
    const float4 kn = make_float4(kr.x * ik, kr.y * ik, kr.z * ik, kr.w * ik);
    *reinterpret_cast<uint2*>(sm.Kb + t * kRowD + lane * 8) = make_uint2(pack_bf16(kn.x, kn.y), pack_bf16(kn.z, kn.w));
    *reinterpret_cast<uint2*>(sm.Qb + t * kRowD + lane * 8) = make_uint2(pack_bf16(qn.x, qn.y), pack_bf16(qn.z, qn.w));
    uint8_t* out = b.out_of(a, 0);  // the group's first head owns K and Q
    const uint32_t at = piece_at<true>(t, lane / 2, kD * 2) + (lane % 2) * 8;
    *reinterpret_cast<uint2*>(out + kOffK + at) = *reinterpret_cast<const uint2*>(sm.Kb + t * kRowD + lane * 8);
    *reinterpret_cast<uint2*>(out + kOffQ + at) = *reinterpret_cast<const uint2*>(sm.Qb + t * kRowD + lane * 8);
  }
  __syncthreads();
}

// K Kᵀ (warps 0-3) and Q Kᵀ (warps 4-7), 16 rows a warp, ungated: kept in the accumulators
// for every head of the group; tiles above the diagonal stay zero.
__device__ __forceinline__ void raw_products(float (&raw)[8][4], const PrepareSmem& sm) {
  const int warp = threadIdx.x >> 5, mt = warp & 3;
  const bool is_a = warp < 4;
  const uint32_t a_base = smem_addr(is_a ? sm.Kb : sm.Qb), k_base = smem_addr(sm.Kb);
#pragma unroll
  for (int n = 0; n < 8; ++n) raw[n][0] = raw[n][1] = raw[n][2] = raw[n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks) {
    uint32_t af[4];
    load_a(af, a_base, kRowD, 16 * mt, 16 * ks);
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      if (np > mt) continue;
      uint32_t bf[4];
      load_b_nk(bf, k_base, kRowD, 16 * np, 16 * ks);
      mma16816<false>(raw[2 * np], af, bf[0], bf[1]);
      mma16816<false>(raw[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

// Head h of the group: this head's v to bf16 (the next head's v loading behind), the gated A
// (to shared memory) and P (to scratch) from the raw products, T = (I + A)^-1, then W and U to
// scratch.
__device__ __forceinline__ void prepare_head(const DeltaNetArgs& a, const PrepareBlock& b, int h,
                                             const float (&raw)[8][4], const PrepareSmem& sm) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int mt = warp & 3, gq = lane >> 2, cq = lane & 3;
  const bool is_a = warp < 4;
  const float* gam = sm.G + h * 4 * kC;
  const float *bet = gam + kC, *egam = bet + kC;
  uint8_t* out = b.out_of(a, h);
  cp_async_wait<0>();
  __syncthreads();  // this head's v in Vf; Qb (the first time) and the last head's Vb, Tw, Tu read
  // v in bf16 where q was; beta goes into T's columns instead (padded rows: beta = 0, v = 0).
  for (int t = warp; t < kC; t += kThreads / 32) {
    const float4 v4 = reinterpret_cast<const float4*>(sm.Vf + t * kD)[lane];
    *reinterpret_cast<uint2*>(sm.Vb + t * kRowD + lane * 8) = make_uint2(pack_bf16(v4.x, v4.y), pack_bf16(v4.z, v4.w));
  }
  __syncthreads();  // Vf read, Vb written
  if (h + 1 < b.group) load_v(sm.Vf, a, b.it, b.j0 + h + 1);

  // The gated A (to shared memory) and P (to scratch) from the raw products.
#pragma unroll
  for (int n = 0; n < 8; ++n) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int i = 16 * mt + gq + 8 * hh, jj = 8 * n + 2 * cq;
      const float d0 = raw[n][2 * hh], d1 = raw[n][2 * hh + 1];
      if (is_a) {
        const float v0 = jj < i ? bet[i] * d0 * expf(gam[i] - gam[jj]) : 0.0f;
        const float v1 = jj + 1 < i ? bet[i] * d1 * expf(gam[i] - gam[jj + 1]) : 0.0f;
        *reinterpret_cast<float2*>(sm.A + i * kAT + jj) = make_float2(v0, v1);
      } else {
        const float v0 = jj <= i ? d0 * expf(gam[i] - gam[jj]) : 0.0f;
        const float v1 = jj + 1 <= i ? d1 * expf(gam[i] - gam[jj + 1]) : 0.0f;
        *reinterpret_cast<uint32_t*>(out + kOffP + piece_at<true>(i, jj / 8, kC * 2) + (jj % 8) * 2) = pack_bf16(v0, v1);
      }
    }
  }
  __syncthreads();  // A written
  invert_unit_lower(sm.A, sm.T, sm.M);  // ends with a barrier: A and M read

  // W = T diag(beta e^gamma) K and U = T diag(beta) V: the column scalings fold into T's bf16
  // copies, which are lower triangular (zero above the diagonal).
  for (int e = tid; e < kC * kC / 2; e += kThreads) {
    const int i = e / (kC / 2), jj = 2 * (e % (kC / 2));
    const float t0 = jj <= i ? sm.T[i * kAT + jj] : 0.0f, t1 = jj + 1 <= i ? sm.T[i * kAT + jj + 1] : 0.0f;
    const float b0 = bet[jj], b1 = bet[jj + 1];
    *reinterpret_cast<uint32_t*>(sm.Tw + i * kRowC + jj * 2) = pack_bf16(t0 * b0 * egam[jj], t1 * b1 * egam[jj + 1]);
    *reinterpret_cast<uint32_t*>(sm.Tu + i * kRowC + jj * 2) = pack_bf16(t0 * b0, t1 * b1);
  }
  __syncthreads();

  // Warps 0-3: W, warps 4-7: U; 64 columns and two of the four 16-row tiles a warp. T's row
  // tile r only has k-steps up to its own (r + 1 of them, lower triangular), so each warp
  // pairs tile 3 - p with tile p (p = (w % 4) / 2): five k-steps a warp.
  const uint32_t t_base = smem_addr(is_a ? sm.Tw : sm.Tu), b_base = smem_addr(is_a ? sm.Kb : sm.Vb);
  const int n0 = 64 * (mt & 1);
#pragma unroll 1
  for (int e = 0; e < 2; ++e) {
    const int rt = e == 0 ? 3 - (mt >> 1) : mt >> 1;
    float o[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    mma_rows_by_64(o, t_base, kRowC, 16 * rt, b_base, kRowD, n0, rt + 1);
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int i = 16 * rt + gq + 8 * hh;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const int col = n0 + 8 * n + 2 * cq;
        if (is_a)
          *reinterpret_cast<uint32_t*>(out + kOffW + piece_at<true>(i, col / 8, kD * 2) + (col % 8) * 2) =
              pack_bf16(o[n][2 * hh], o[n][2 * hh + 1]);
        else
          *reinterpret_cast<float2*>(out + kOffU + (col / kBV) * (kC * kBV * 4) +
                                     piece_at<true>(i, (col % kBV) / 4, kBV * 4) + (col % 4) * 4) =
              make_float2(o[n][2 * hh], o[n][2 * hh + 1]);
      }
    }
  }
}

}  // namespace
}  // namespace ds::cuda::ops::delta
