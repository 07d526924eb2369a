// The scan of the tensor-core chunked delta rule (delta_rule_tc.cuh), the only sequential
// part: one block per (sequence, value head, kCols state columns), the state tile in fp32 mma
// accumulators, a chunk step in stages -- the state as an operand, V' = U - W S (and with the
// output folded in, Q S on the same fragments), the state update S = e^gamma_last S + Kᵀ
// diag(e^(gamma_last - gamma)) V' (and P V'), the output -- while the next chunk's stage of
// scratch tiles lands by bulk copies (tma_copy.cuh) on the other buffer's barrier. Included by
// delta_rule_tc.cu only.
#pragma once

#include <cstdint>

#include "kernels/cuda/delta_rule_tc_fragments.cuh"
#include "kernels/cuda/tma_copy.cuh"

namespace ds::cuda::ops::delta {
namespace {

using detail::bulk_copy;
using detail::mbar_arrive_expect_tx;
using detail::mbar_fence_init;
using detail::mbar_init;
using detail::mbar_wait;

// One scan block: its sequence, head and columns, its shared memory (ScanLayout), and the
// stages of a chunk step. kFold: the block also computes its output columns of every chunk,
// O = e^gamma (Q S) + P V', from the state and V' it already holds.
template <bool kFold, int kCols, class State>
struct ScanBlock {
  using L = ScanLayout<kFold, kCols>;
  static constexpr int kStage = L::kStage, kRowS = L::kRowS;
  static constexpr int kNT = kCols / 8;   // n-tiles of the state rows a warp carries
  static constexpr int kWN = kCols / 16;  // n-tiles of V' and the output a warp computes
  static_assert(kCols % kBV == 0 && (kFold || kCols == kBV));
  // With kFold, fragments several k-steps at a time ahead of their products: the ldmatrix
  // and mma wrappers are volatile asm, which the compiler keeps in source order, so a load
  // written next to its product exposes its latency every k-step. Two blocks an SM (the
  // unfolded kernel) hide it, and there the grouping measured slower; 64 columns a block
  // load twice the state fragments a k-step, so two k-steps ahead there.
  static constexpr int kAhead = kFold ? 4 * kBV / kCols : 1;
  static constexpr int kAheadU = kFold ? 2 * kBV / kCols : 1;  // the same for the state update

  const DeltaNetArgs& a;
  const DeltaNetChunkItem* items;
  float* scratch;
  uint8_t* smem;
  uint8_t* Ss;  // [D][kRowS] the state, bf16
  uint8_t* Vs;  // [C][kRowS] V', bf16
  uint8_t* Vd;  // [C][kRowS] e^(gamma_last - gamma) V', bf16
  uint32_t bars;  // a stage's bytes have landed
  int tile, j, owner, tid, lane, warp, g, c;
  int mt, nb;  // warp w's share of V' and the output: tokens 16 (w % 4) .., n-tiles nb .. nb + kWN - 1
  DeltaNetChunkSeq cs;  // read_sequence()
  State* states;
  State* S;  // the block's columns of its sequence's state

  __device__ __forceinline__ ScanBlock(uint8_t* smem_, const DeltaNetArgs& a_, const DeltaNetChunkItem* items_,
                                       float* scratch_, int group)
      : a(a_),
        items(items_),
        scratch(scratch_),
        smem(smem_),
        Ss(smem_ + 2 * kStage),
        Vs(Ss + kD * kRowS),
        Vd(Vs + kC * kRowS),
        bars(detail::smem_addr(Vd + kC * kRowS)),
        tile(static_cast<int>(blockIdx.x)),
        j(static_cast<int>(blockIdx.y)),
        owner(owner_of(j, group)),
        tid(static_cast<int>(threadIdx.x)),
        lane(tid & 31),
        warp(tid >> 5),
        g(lane >> 2),
        c(lane & 3),
        mt(warp & 3),
        nb(kWN * (warp >> 2)),
        states(static_cast<State*>(a_.state)) {}
  // The block's sequence (after wait_for_previous_kernel(): the plan is an earlier kernel's).
  __device__ __forceinline__ void read_sequence(const DeltaNetChunkSeq* chunk_seqs) {
    cs = chunk_seqs[blockIdx.z];
    const DevSeq sq = a.seqs[cs.seq];
    S = state_of(sq.state_slot);
  }

  __device__ __forceinline__ State* state_of(int32_t slot) const {
    return states + ((static_cast<int64_t>(slot) * a.n_layers + a.layer) * a.v_heads + j) * kD * kD + tile * kCols;
  }
  __device__ __forceinline__ uint8_t* stage(int n) const { return smem + (n & 1) * kStage; }  // W, K, U, Eg, Ed (, Q, P)
  __device__ __forceinline__ uint8_t* scratch_at(int n, int head) const {
    return scratch_of(scratch, cs.first_item + n, a.v_heads, head);
  }

  // A stage is four or six bulk copies of whole tiles, issued by one thread, that complete on
  // the stage's barrier (as cp.async pieces, 14 a thread, their issue was a fifth of the chunk
  // step's stalls: docs/bench-log, "Prepare and the folded scan under ncu").
  __device__ __forceinline__ void load_stage(int n) const {
    const uint8_t* src = scratch_at(n, j);
    const uint8_t* shared = scratch_at(n, owner);  // K, Q
    const uint32_t dst = detail::smem_addr(stage(n)), bar = bars + 8 * (n & 1);
    mbar_arrive_expect_tx(bar, kStage);
    bulk_copy(dst, src + kOffW, kC * kD * 2, bar);
    bulk_copy(dst + L::kAtK, shared + kOffK, kC * kD * 2, bar);
    bulk_copy(dst + L::kAtU, src + kOffU + tile * (kC * kCols * 4), kC * kCols * 4, bar);
    bulk_copy(dst + L::kAtE, src + kOffEg, 2 * kC * 4, bar);
    if constexpr (kFold) {
      bulk_copy(dst + L::kAtQ, shared + kOffQ, kC * kD * 2, bar);
      bulk_copy(dst + L::kAtP, src + kOffP, kC * kC * 2, bar);
    }
  }
  // The two stages' barriers, and the first chunk's stage on its way. Ends with a barrier.
  __device__ __forceinline__ void start() const {
    if (tid == 0) {
      mbar_init(bars, 1);
      mbar_init(bars + 8, 1);
      mbar_fence_init();
      load_stage(0);
    }
    __syncthreads();  // the barriers initialised
  }

  // The state tile in mma accumulator layout: warp w holds rows 16w .. 16w+15 (dk), n-tile n
  // columns 8n .. 8n+7; s[n][0..1] at row 16w + g, s[n][2..3] at row 16w + g + 8.
  __device__ __forceinline__ void load_state(float (&s)[kNT][4]) const {
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float2 v = state_load2(S + static_cast<int64_t>(16 * warp + g + 8 * h) * kD + 8 * n + 2 * c);
        s[n][2 * h] = v.x;
        s[n][2 * h + 1] = v.y;
      }
    }
  }
  // The state tile to `to` (the sequence's slot at the end, a snapshot slot on the way).
  __device__ __forceinline__ void store_state(const float (&s)[kNT][4], State* to) const {
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        state_store2(to + static_cast<int64_t>(16 * warp + g + 8 * h) * kD + 8 * n + 2 * c, s[n][2 * h],
                     s[n][2 * h + 1]);
    }
  }
  // Each chunk's item (its snapshot slot; with kFold its rows) and decay are read one chunk
  // ahead: read at the top of the chunk, their global round trip (the decay's from DRAM:
  // prepare wrote it long before) sat at the head of the serial chain.
  __device__ __forceinline__ DeltaNetChunkItem item_of(int n) const {
    return n < cs.n_items ? items[cs.first_item + n] : DeltaNetChunkItem{0, 0, 0, -1};
  }
  __device__ __forceinline__ float decay_of(int n) const {
    return n < cs.n_items ? *reinterpret_cast<const float*>(scratch_at(n, j) + kOffDecay) : 0.0f;
  }

  // The state as the B operand of W S, in bf16.
  __device__ __forceinline__ void state_operand(const float (&s)[kNT][4]) const {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        *reinterpret_cast<uint32_t*>(Ss + (16 * warp + g + 8 * h) * kRowS + (8 * nt + 2 * c) * 2) =
            pack_bf16(s[nt][2 * h], s[nt][2 * h + 1]);
    }
  }

  // V' = U - W S (and with kFold Q S on the same state fragments, into qs), the even and odd
  // k-steps in their own accumulators: two chains of four mma instead of one of eight. V' goes
  // to Vs (for P V' and the output pass) and, scaled by its rows' decay to the chunk's end, to
  // Vd (for the state update).
  // scr: the chunk's scratch (the unfolded scan leaves the chunk's state there).
  __device__ __forceinline__ void new_values(int n, uint8_t* scr, float (&qs)[2][kWN][4]) const {
    const uint8_t* st = stage(n);
    const uint32_t w_base = detail::smem_addr(st), q_base = detail::smem_addr(st + L::kAtQ);
    const uint32_t ss_base = detail::smem_addr(Ss);
    const uint8_t* Us = st + L::kAtU;
    const float* Ed = reinterpret_cast<const float*>(st + L::kAtE + kC * 4);
    float ws[2][kWN][4];
#pragma unroll
    for (int e = 0; e < 2 * kWN; ++e) {
      ws[e / kWN][e % kWN][0] = ws[e / kWN][e % kWN][1] = ws[e / kWN][e % kWN][2] = ws[e / kWN][e % kWN][3] = 0.0f;
      qs[e / kWN][e % kWN][0] = qs[e / kWN][e % kWN][1] = qs[e / kWN][e % kWN][2] = qs[e / kWN][e % kWN][3] = 0.0f;
    }
    if constexpr (!kFold) {
      // The state this chunk starts from, for the output pass: 128 rows of 64 bytes.
      for (int i = tid; i < kD * (kCols * 2 / 16); i += kThreads) {
        const int r = i / (kCols * 2 / 16), q = i % (kCols * 2 / 16);
        *reinterpret_cast<uint4*>(scr + kOffS + r * kD * 2 + tile * kCols * 2 + q * 16) =
            *reinterpret_cast<const uint4*>(Ss + r * kRowS + q * 16);
      }
    }
#pragma unroll
    for (int k4 = 0; k4 < kD / 16; k4 += kAhead) {
      uint32_t af[kAhead][4], aq[kAhead][4], bf[kAhead][kWN / 2][4];
#pragma unroll
      for (int i = 0; i < kAhead; ++i) {
        load_a<true>(af[i], w_base, kD * 2, 16 * mt, 16 * (k4 + i));
        if constexpr (kFold) load_a<true>(aq[i], q_base, kD * 2, 16 * mt, 16 * (k4 + i));
#pragma unroll
        for (int np = 0; np < kWN / 2; ++np) load_b_kn(bf[i][np], ss_base, kRowS, 8 * nb + 16 * np, 16 * (k4 + i));
      }
#pragma unroll
      for (int i = 0; i < kAhead; ++i) {
#pragma unroll
        for (int np = 0; np < kWN / 2; ++np) {
          mma16816<false>(ws[i & 1][2 * np], af[i], bf[i][np][0], bf[i][np][1]);
          mma16816<false>(ws[i & 1][2 * np + 1], af[i], bf[i][np][2], bf[i][np][3]);
          if constexpr (kFold) {
            mma16816<false>(qs[i & 1][2 * np], aq[i], bf[i][np][0], bf[i][np][1]);
            mma16816<false>(qs[i & 1][2 * np + 1], aq[i], bf[i][np][2], bf[i][np][3]);
          }
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * mt + g + 8 * h;
      const float ed = Ed[r];
#pragma unroll
      for (int e = 0; e < kWN; ++e) {
        const int cc = 8 * (nb + e) + 2 * c;
        const float2 u = *reinterpret_cast<const float2*>(Us + (cc / kBV) * (kC * kBV * 4) +
                                                          piece_at<true>(r, (cc % kBV) / 4, kBV * 4) + (cc % 4) * 4);
        const float v0 = u.x - (ws[0][e][2 * h] + ws[1][e][2 * h]), v1 = u.y - (ws[0][e][2 * h + 1] + ws[1][e][2 * h + 1]);
        *reinterpret_cast<uint32_t*>(Vs + r * kRowS + cc * 2) = pack_bf16(v0, v1);
        *reinterpret_cast<uint32_t*>(Vd + r * kRowS + cc * 2) = pack_bf16(ed * v0, ed * v1);
      }
    }
  }

  // V' for the output pass (the unfolded scan): 64 rows of 64 bytes.
  __device__ __forceinline__ void values_to_scratch(uint8_t* scr) const {
    for (int i = tid; i < kC * (kCols * 2 / 16); i += kThreads) {
      const int r = i / (kCols * 2 / 16), q = i % (kCols * 2 / 16);
      *reinterpret_cast<uint4*>(scr + kOffVn + r * kD * 2 + tile * kCols * 2 + q * 16) =
          *reinterpret_cast<const uint4*>(Vs + r * kRowS + q * 16);
    }
  }

  // S = e^gamma_last S + Kᵀ diag(e^(gamma_last - gamma)) V': warp w's rows 16w .. (dk) over
  // the chunk's 64 tokens; with kFold, P V' into po (the warp's tokens and columns; P is lower
  // triangular, so k-steps up to the warp's own).
  __device__ __forceinline__ void update_state(int n, float decay, float (&s)[kNT][4], float (&po)[kWN][4]) const {
    const uint8_t* st = stage(n);
    const uint32_t k_base = detail::smem_addr(st + L::kAtK), p_base = detail::smem_addr(st + L::kAtP);
    const uint32_t vs_base = detail::smem_addr(Vs), vd_base = detail::smem_addr(Vd);
#pragma unroll
    for (int e = 0; e < kWN; ++e) po[e][0] = po[e][1] = po[e][2] = po[e][3] = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) s[nt][0] *= decay, s[nt][1] *= decay, s[nt][2] *= decay, s[nt][3] *= decay;
#pragma unroll
    for (int k2 = 0; k2 < kC / 16; k2 += kAheadU) {
      uint32_t af[kAheadU][4], ap[kAheadU][4], bf[kAheadU][kNT / 2][4], bv[kAheadU][kWN / 2][4];
#pragma unroll
      for (int i = 0; i < kAheadU; ++i) {
        load_a_trans<true>(af[i], k_base, kD * 2, 16 * warp, 16 * (k2 + i));
        if constexpr (kFold) {
          if (k2 + i <= mt) {
            load_a<true>(ap[i], p_base, kC * 2, 16 * mt, 16 * (k2 + i));
#pragma unroll
            for (int np = 0; np < kWN / 2; ++np)  // the warp's columns of V'
              load_b_kn(bv[i][np], vs_base, kRowS, 8 * nb + 16 * np, 16 * (k2 + i));
          }
        }
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) load_b_kn(bf[i][np], vd_base, kRowS, 16 * np, 16 * (k2 + i));
      }
#pragma unroll
      for (int i = 0; i < kAheadU; ++i) {
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          mma16816<false>(s[2 * np], af[i], bf[i][np][0], bf[i][np][1]);
          mma16816<false>(s[2 * np + 1], af[i], bf[i][np][2], bf[i][np][3]);
        }
        if constexpr (kFold) {
          if (k2 + i <= mt) {
#pragma unroll
            for (int np = 0; np < kWN / 2; ++np) {
              mma16816<false>(po[2 * np], ap[i], bv[i][np][0], bv[i][np][1]);
              mma16816<false>(po[2 * np + 1], ap[i], bv[i][np][2], bv[i][np][3]);
            }
          }
        }
      }
    }
  }

  // O = diag(e^gamma) Q S + P V' for the warp's tokens of the chunk (padded rows dropped).
  __device__ __forceinline__ void write_output(int n, const DeltaNetChunkItem& it, const float (&qs)[2][kWN][4],
                                               const float (&po)[kWN][4]) const {
    const float* Eg = reinterpret_cast<const float*>(stage(n) + L::kAtE);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * mt + g + 8 * h;
      if (r >= it.len) continue;
      const float eg = Eg[r];
      float* dst = a.out + ((static_cast<int64_t>(it.row0) + r) * a.v_heads + j) * kD + tile * kCols + 8 * nb + 2 * c;
#pragma unroll
      for (int e = 0; e < kWN; ++e)
        *reinterpret_cast<float2*>(dst + 8 * e) = make_float2(eg * (qs[0][e][2 * h] + qs[1][e][2 * h]) + po[e][2 * h],
                                                              eg * (qs[0][e][2 * h + 1] + qs[1][e][2 * h + 1]) +
                                                                  po[e][2 * h + 1]);
    }
  }
};

}  // namespace
}  // namespace ds::cuda::ops::delta
