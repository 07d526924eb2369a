// The chunked gated delta rule on the tensor cores (what production runs for prefill chunks;
// the fp32 version for the f32 reference mode is in delta_rule.cu). The maths is the WY form
// of kernel-notes 3.2 with C = 64 tokens per chunk, per value head j (key head j / (Hv / Hk)),
// gamma the in-chunk cumulative sum of the log decays g:
//   A = strict-lower(beta_i k_i·k_j e^(gamma_i - gamma_j)),  P = lower-incl(q_i·k_j e^(gamma_i - gamma_j)),
//   W = (I + A)^-1 (beta e^gamma K),  U = (I + A)^-1 (beta V),
//   V' = U - W S,  O = e^gamma (Q S) + P V',  S <- e^gamma_last S + Kᵀ (e^(gamma_last - gamma) V')
// (the decays enter as row scales, as flash-linear-attention applies them, so K and Q are the
// key head's and shared by its value heads).
// Three launches, the split of flash-linear-attention's chunk_gated_delta_rule (our own code),
// or two when the scan also computes the output (below):
//  1. prepare, one block per (chunk, the value heads of one key head), all chunks in
//     parallel: the L2 norms and the raw K Kᵀ, Q Kᵀ (mma.sync) once for the key head; per
//     value head the gates and gamma (double, as the CPU backend), the gated A and P,
//     T = (I + A)^-1 by 16 x 16 blocks (fp32; the off-diagonal block products on the tensor
//     cores with tf32 operands), then W and U as two mma products with T (bf16), written to
//     scratch: W and P in bf16; U, e^gamma, e^(gamma_last - gamma) and e^gamma_last in f32;
//     and once for the key head the normalised K and Q in bf16.
//  2. scan, one block per (sequence, value head, 32 state columns), the only sequential part:
//     the state tile lives in fp32 mma accumulators; per chunk V' = U - W S and the state
//     update run on the tensor cores with S and V' rounded to bf16 as operands; the next
//     chunk's W, K and U load (cp.async, double-buffered) while this one computes. It leaves,
//     per chunk, V' and the state the chunk started from (bf16) for the output pass; a chunk
//     that carries a snapshot slot (append_chunk_items) also gets that state, in fp32, there.
//     When its blocks fit the SMs one each (a long prompt of the 9B), it computes its columns
//     of the output itself from that state and V' (Q, P and e^gamma load with the stage), and
//     the third launch and the scratch round trip of the state and V' are gone.
//  3. output, one block per (chunk, value head), in parallel again: O = e^gamma (Q S) + P V'.
// Padded rows of a short last chunk have beta = g = 0 and zero q, k, v, so they change nothing.
//
// Precision: every matrix product takes bf16 operands with fp32 accumulation (the operands
// are the normalised q and k, v, T, W, P, V' and the state), as flash-linear-attention's
// kernels do; the gates, gamma, the inverse T, U and the carried state are fp32 (the slots
// hold the state in fp32 or bf16: delta_rule_common.cuh). Outputs and
// the state a chunk leaves are therefore within bf16 rounding of the token-by-token recurrence
// (relative ~4e-3 over a sequence and on the states, ~1.5e-2 on the worst single row scaled by
// the sequence's row norm; not the fp32 path's ~1e-6), as the tests bound it: tests/kernels_cuda (on the GPU) and
// tests/kernels_cuda_emu (this source on the CPU, through an emulation of the warp-level
// instructions).
//
// mma.sync m16n8k16 fragments come from ldmatrix as in attention_prefill.cu: tiles a kernel
// writes to shared memory itself are row-major with rows padded by 16 bytes (row strides of
// 80, 144 and 272 bytes put the eight rows an ldmatrix reads in distinct bank groups); the
// tiles prepare hands the scan through scratch are unpadded and swizzled instead (piece_at),
// so they travel as whole-tile bulk copies.
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/decode_tc_ptx.cuh"
#include "kernels/cuda/delta_rule_common.cuh"
#include "kernels/cuda/tma_copy.cuh"

namespace ds::cuda::ops::delta {
namespace {

using detail::cp_async;
using detail::cp_async_commit;
using detail::cp_async_wait;
using detail::ldsm_x4;
using detail::ldsm_x4_trans;
using detail::mma16816;
using detail::mma1688_tf32;
using detail::to_tf32;
using detail::smem_addr;
using detail::bulk_copy;
using detail::mbar_arrive_expect_tx;
using detail::mbar_fence_init;
using detail::mbar_init;
using detail::mbar_wait;

constexpr int kThreads = 256;  // eight warps in every kernel here
constexpr int kBV = 32;        // state columns per scan block

// Scratch per (chunk item, value head), byte offsets (kDeltaNetScratchFloats * 4 bytes apart).
// K and Q depend on the key head only: prepare writes them once per group of value heads, in
// the slot of the group's first head (owner_of), and the per-head decays enter as row scales
// (e^(gamma_last - gamma) on V' for the state update, e^gamma on the output's Q S), as
// flash-linear-attention applies them: a bf16 copy of K and of Q per value head would be a
// fifth of the scratch traffic.
// W, K, Q and P are swizzled tiles (piece_at), U is four swizzled [C][kBV] tiles, one per
// scan block's columns: each is copied to shared memory as it is.
constexpr int64_t kOffW = 0;                        // bf16 [C][D]   prepare -> scan
constexpr int64_t kOffK = kOffW + kC * kD * 2;      // bf16 [C][D]   prepare -> scan: normalised k (owner's slot)
constexpr int64_t kOffQ = kOffK + kC * kD * 2;      // bf16 [C][D]   prepare -> output: normalised, scaled q (owner's slot)
constexpr int64_t kOffVn = kOffQ + kC * kD * 2;     // bf16 [C][D]   scan -> output: V' (row-major)
constexpr int64_t kOffP = kOffVn + kC * kD * 2;     // bf16 [C][C]   prepare -> output
constexpr int64_t kOffS = kOffP + kC * kC * 2;      // bf16 [D][D]   scan -> output: the state before the chunk (row-major)
constexpr int64_t kOffU = kOffS + kD * kD * 2;      // f32 [D/kBV][C][kBV]   prepare -> scan
constexpr int64_t kOffDecay = kOffU + kC * kD * 4;  // f32           prepare -> scan: e^gamma_last
constexpr int64_t kOffEg = kOffDecay + 16;          // f32 [C]       prepare -> output: e^gamma
constexpr int64_t kOffEd = kOffEg + kC * 4;         // f32 [C]       prepare -> scan: e^(gamma_last - gamma)
constexpr int64_t kScratchBytes = kDeltaNetScratchFloats * 4;
static_assert(kOffEd + kC * 4 <= kScratchBytes, "tensor-core scratch layout must fit the scratch sizing");

// Padded row strides (bytes) of the bf16 tiles in shared memory.
constexpr int kRowD = (kD + 8) * 2;     // 128 columns: 272
constexpr int kRowC = (kC + 8) * 2;     // 64 columns: 144
// Each kernel is sized for two blocks per SM (228 KB of shared memory, 1 KB reserved per block).
constexpr int kTwoPerSm = 113 * 1024;

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ uint8_t* scratch_of(float* scratch, int64_t item, int v_heads, int j) {
  return reinterpret_cast<uint8_t*>(scratch) + (item * v_heads + j) * kScratchBytes;
}
// The value head whose slot holds K and Q for head j: the first of its prepare group.
__device__ __forceinline__ int owner_of(int j, int group) { return j - j % group; }

// Where the 16-byte piece `piece` of row `row` of a tile sits, rows `stride` bytes apart: in
// place in a padded tile; in a swizzled one (rows a multiple of 128 bytes, unpadded) at piece
// piece ^ (row % 8), so the eight rows an ldmatrix reads still fall in distinct bank groups.
// Prepare writes the tiles the scan reads (W, K, Q, P, U) swizzled, so a stage arrives as a
// few bulk copies of whole tiles.
template <bool kSwizzled>
__device__ __forceinline__ uint32_t piece_at(int row, int piece, int stride) {
  return row * stride + ((kSwizzled ? piece ^ (row & 7) : piece) << 4);
}

// Fragment loads, tile row-major in shared memory at `base` with `stride` bytes per row:
// the A operand (16 x 16, rows m0.., columns k0..) of a [m][k] tile, and of a [k][m] tile
// (transposed on the way); B operands for two n-tiles (k16 x n16: {b[0], b[1]} for n0..n0+7,
// {b[2], b[3]} for n0+8..) of a [n][k] tile, and of a [k][n] tile.
template <bool kSwizzled = false>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], uint32_t base, int stride, int m0, int k0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4(a, base + piece_at<kSwizzled>(m0 + lane % 16, k0 / 8 + lane / 16, stride));
}
template <bool kSwizzled = false>
__device__ __forceinline__ void load_a_trans(uint32_t (&a)[4], uint32_t base, int stride, int m0, int k0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4_trans(a, base + piece_at<kSwizzled>(k0 + lane % 8 + (lane / 16) * 8, m0 / 8 + (lane / 8) % 2, stride));
}
__device__ __forceinline__ void load_b_nk(uint32_t (&b)[4], uint32_t base, int stride, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4(b, base + (n0 + lane % 8 + (lane / 16) * 8) * stride + (k0 / 8 + (lane / 8) % 2) * 16);
}
__device__ __forceinline__ void load_b_kn(uint32_t (&b)[4], uint32_t base, int stride, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4_trans(b, base + (k0 + lane % 8 + ((lane / 8) % 2) * 8) * stride + (n0 / 8 + lane / 16) * 16);
}

// Rows x (bytes_per_row / 16) 16-byte copies from global rows `src_stride` bytes apart into
// shared rows `dst_stride` bytes apart, spread over the block.
__device__ __forceinline__ void copy_rows(uint32_t dst, int dst_stride, const uint8_t* src, int64_t src_stride, int rows,
                                          int bytes_per_row) {
  const int per_row = bytes_per_row / 16;
  for (int i = threadIdx.x; i < rows * per_row; i += kThreads) {
    const int r = i / per_row, c = i % per_row;
    cp_async<16>(dst + r * dst_stride + c * 16, src + r * src_stride + c * 16, 16);
  }
}

// o (rows m0 .. m0 + 15, columns n0 .. n0 + 63, in mma accumulators) += A B over the first
// k_steps 16-wide steps of k: A a [m][k] tile (swizzled or padded), B a padded [k][n] tile.
template <bool kSwizzledA = false>
__device__ __forceinline__ void mma_rows_by_64(float (&o)[8][4], uint32_t a_base, int a_stride, int m0, uint32_t b_base,
                                               int b_stride, int n0, int k_steps) {
#pragma unroll 2
  for (int ks = 0; ks < k_steps; ++ks) {
    uint32_t af[4];
    load_a<kSwizzledA>(af, a_base, a_stride, m0, 16 * ks);
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t bf[4];
      load_b_kn(bf, b_base, b_stride, n0 + 16 * np, 16 * ks);
      mma16816<false>(o[2 * np], af, bf[0], bf[1]);
      mma16816<false>(o[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

// ---- 1. prepare

// One block per (chunk, group of value heads that share a key head): what depends only on the
// key head -- the q and k loads, their L2 norms and bf16 copies, and the raw products K Kᵀ and
// Q Kᵀ (kept in the mma accumulators) -- is done once for the group; the gates of all its heads
// in parallel (a warp a head); then, head by head, the gated A and P, T = (I + A)^-1, W and U,
// while the next head's v loads (cp.async) behind that work. With GQA (16 key / 32 or 48 value
// heads) this halves or thirds the q/k traffic and the K Kᵀ, Q Kᵀ products of one block per
// value head, and gives the serial phases of each head a load to hide behind.
constexpr int kBlk = 16;
// A and T rows are kC + 8 floats apart, so the eight rows an mma fragment's stores or a
// warp's row reads touch fall in different banks.
constexpr int kAT = kC + 8;
constexpr int kMaxGroup = 8;  // value heads per block at most (a warp computes each head's gates)
// Shared memory: Kb, Qb (bf16 [C][kRowD]; Qb holds v in bf16 once the raw products are done),
// Vf (the next head's v, f32 [C][D]), T and A (f32 [C][kAT]; T's two bf16 copies Tw, Tu go
// where A was once the inverse is done), the inverse's temporaries M (three 16 x 16 blocks),
// and per head of the group its gates (4 x [C] f32).
constexpr int kPrepFixedSmem = 2 * kC * kRowD + kC * kD * 4 + 2 * kC * kAT * 4 + 3 * kBlk * kBlk * 4;  // 105 KB
constexpr int kPrepGatesSmem = 4 * kC * 4;  // per head of the group
static_assert(2 * kC * kRowC <= kC * kAT * 4, "Tw and Tu fit where A was");
static_assert(kPrepFixedSmem + kMaxGroup * kPrepGatesSmem <= kTwoPerSm);

// Value heads per prepare block: the key head's whole group when it has at most kMaxGroup,
// else its largest divisor that does.
int prepare_group(int k_heads, int v_heads) {
  const int ratio = v_heads / k_heads;
  int g = std::min(ratio, kMaxGroup);
  while (ratio % g != 0) --g;
  return g;
}

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

__global__ void __launch_bounds__(kThreads, 2) deltanet_tc_prepare_kernel(const DeltaNetArgs a, const DeltaNetChunkItem* items,
                                                                        float* scratch, int group) {
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* Kb = smem;                                            // [C][kRowD] normalised k, bf16
  uint8_t* Qb = Kb + kC * kRowD;                                 // [C][kRowD] normalised, scaled q, bf16; then v
  float* Vf = reinterpret_cast<float*>(Qb + kC * kRowD);         // [C][D] the next head's v, f32
  float* T = Vf + kC * kD;                                       // [C][kAT] (I + A)^-1
  float* A = T + kC * kAT;                                       // [C][kAT]
  float* M = A + kC * kAT;                                       // [3][16][16]
  uint8_t* Tw = reinterpret_cast<uint8_t*>(A);                   // [C][kRowC] T diag(beta e^gamma), bf16 (after the inverse)
  uint8_t* Tu = Tw + kC * kRowC;                                 // [C][kRowC] T diag(beta), bf16
  float* G = M + 3 * kBlk * kBlk;                                // per head: gamma, beta, e^gamma, e^(gamma_last - gamma)
  uint8_t* Vb = Qb;

  wait_for_previous_kernel();
  const DeltaNetChunkItem it = items[blockIdx.x];
  const int j0 = blockIdx.y * group, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int kh = j0 / (a.v_heads / a.k_heads);
  const int64_t key_dim = static_cast<int64_t>(a.k_heads) * kD;
  const int64_t conv_dim = 2 * key_dim + static_cast<int64_t>(a.v_heads) * kD;
  auto out_of = [&](int h) { return scratch_of(scratch, blockIdx.x, a.v_heads, j0 + h); };

  // Every global read of the first head is issued up front, so the loads overlap the gates'
  // double-precision maths instead of following it one dependent step at a time: v by
  // cp.async, each warp's eight rows of q and k into registers.
  load_v(Vf, a, it, j0);
  constexpr int kRowsPerWarp = kC / (kThreads / 32);
  float4 q4[kRowsPerWarp], k4[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int t = warp + r * (kThreads / 32);
    q4[r] = k4[r] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (t < it.len) {
      const float* x = a.qkv + (static_cast<int64_t>(it.row0) + t) * conv_dim;
      q4[r] = reinterpret_cast<const float4*>(x + kh * kD)[lane];
      k4[r] = reinterpret_cast<const float4*>(x + key_dim + kh * kD)[lane];
    }
  }

  // Gates, a (token, head) pair a thread: double-precision transcendentals, spread over every
  // warp (and so every scheduler's FP64 units) rather than a warp per head; g waits in gamma's
  // place for the prefix sums.
  for (int p = tid; p < group * kC; p += kThreads) {
    const int h = p / kC, t = p % kC;
    float gg = 0.0f, bb = 0.0f;
    if (t < it.len) {
      const Gates gt = gates(a, static_cast<int64_t>(it.row0) + t, j0 + h);
      gg = gt.g;
      bb = gt.beta;
    }
    G[h * 4 * kC + t] = gg;
    G[h * 4 * kC + kC + t] = bb;
  }
  __syncthreads();
  // Their in-chunk prefix sums, a warp per head of the group (two tokens per lane, the sum in
  // double).
  for (int h = warp; h < group; h += kThreads / 32) {
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
    uint8_t* out = out_of(h);
    if (lane == 0) *reinterpret_cast<float*>(out + kOffDecay) = expf(last);
    *reinterpret_cast<float2*>(out + kOffEg + 8 * lane) = make_float2(egam[2 * lane], egam[2 * lane + 1]);
    *reinterpret_cast<float2*>(out + kOffEd + 8 * lane) = make_float2(edec[2 * lane], edec[2 * lane + 1]);
  }
  __syncthreads();

  // Rows, a warp each: L2 norms; k and q in bf16 (for A, P and W, and to the group's scratch
  // for the scan and output passes).
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int t = warp + r * (kThreads / 32);
    const float4 qr = q4[r], kr = k4[r];
    const float sq = warp_sum(qr.x * qr.x + qr.y * qr.y + qr.z * qr.z + qr.w * qr.w);
    const float sk = warp_sum(kr.x * kr.x + kr.y * kr.y + kr.z * kr.z + kr.w * kr.w);
    const float iq = (1.0f / sqrtf(sq + 1e-6f)), ik = 1.0f / sqrtf(sk + 1e-6f), qs = q_scale();
    const float4 qn = make_float4((qr.x * iq) * qs, (qr.y * iq) * qs, (qr.z * iq) * qs, (qr.w * iq) * qs);
    const float4 kn = make_float4(kr.x * ik, kr.y * ik, kr.z * ik, kr.w * ik);
    *reinterpret_cast<uint2*>(Kb + t * kRowD + lane * 8) = make_uint2(pack_bf16(kn.x, kn.y), pack_bf16(kn.z, kn.w));
    *reinterpret_cast<uint2*>(Qb + t * kRowD + lane * 8) = make_uint2(pack_bf16(qn.x, qn.y), pack_bf16(qn.z, qn.w));
    uint8_t* out = out_of(0);  // the group's first head owns K and Q
    const uint32_t at = piece_at<true>(t, lane / 2, kD * 2) + (lane % 2) * 8;
    *reinterpret_cast<uint2*>(out + kOffK + at) = *reinterpret_cast<const uint2*>(Kb + t * kRowD + lane * 8);
    *reinterpret_cast<uint2*>(out + kOffQ + at) = *reinterpret_cast<const uint2*>(Qb + t * kRowD + lane * 8);
  }
  __syncthreads();

  // K Kᵀ (warps 0-3) and Q Kᵀ (warps 4-7), 16 rows a warp, ungated: kept in the accumulators
  // for every head of the group; tiles above the diagonal stay zero.
  const int mt = warp & 3, gq = lane >> 2, cq = lane & 3;
  const bool is_a = warp < 4;
  float raw[8][4];
  {
    const uint32_t a_base = smem_addr(is_a ? Kb : Qb), k_base = smem_addr(Kb);
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

#pragma unroll 1
  for (int h = 0; h < group; ++h) {
    const float* gam = G + h * 4 * kC;
    const float *bet = gam + kC, *egam = bet + kC;
    uint8_t* out = out_of(h);
    cp_async_wait<0>();
    __syncthreads();  // this head's v in Vf; Qb (the first time) and the last head's Vb, Tw, Tu read
    // v in bf16 where q was; beta goes into T's columns instead (padded rows: beta = 0, v = 0).
    for (int t = warp; t < kC; t += kThreads / 32) {
      const float4 v4 = reinterpret_cast<const float4*>(Vf + t * kD)[lane];
      *reinterpret_cast<uint2*>(Vb + t * kRowD + lane * 8) = make_uint2(pack_bf16(v4.x, v4.y), pack_bf16(v4.z, v4.w));
    }
    __syncthreads();  // Vf read, Vb written
    if (h + 1 < group) load_v(Vf, a, it, j0 + h + 1);

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
          *reinterpret_cast<float2*>(A + i * kAT + jj) = make_float2(v0, v1);
        } else {
          const float v0 = jj <= i ? d0 * expf(gam[i] - gam[jj]) : 0.0f;
          const float v1 = jj + 1 <= i ? d1 * expf(gam[i] - gam[jj + 1]) : 0.0f;
          *reinterpret_cast<uint32_t*>(out + kOffP + piece_at<true>(i, jj / 8, kC * 2) + (jj % 8) * 2) = pack_bf16(v0, v1);
        }
      }
    }
    __syncthreads();  // A written
    invert_unit_lower(A, T, M);  // ends with a barrier: A and M read

    // W = T diag(beta e^gamma) K and U = T diag(beta) V: the column scalings fold into T's bf16
    // copies, which are lower triangular (zero above the diagonal).
    for (int e = tid; e < kC * kC / 2; e += kThreads) {
      const int i = e / (kC / 2), jj = 2 * (e % (kC / 2));
      const float t0 = jj <= i ? T[i * kAT + jj] : 0.0f, t1 = jj + 1 <= i ? T[i * kAT + jj + 1] : 0.0f;
      const float b0 = bet[jj], b1 = bet[jj + 1];
      *reinterpret_cast<uint32_t*>(Tw + i * kRowC + jj * 2) = pack_bf16(t0 * b0 * egam[jj], t1 * b1 * egam[jj + 1]);
      *reinterpret_cast<uint32_t*>(Tu + i * kRowC + jj * 2) = pack_bf16(t0 * b0, t1 * b1);
    }
    __syncthreads();

    // Warps 0-3: W, warps 4-7: U; 64 columns and two of the four 16-row tiles a warp. T's row
    // tile r only has k-steps up to its own (r + 1 of them, lower triangular), so each warp
    // pairs tile 3 - p with tile p (p = (w % 4) / 2): five k-steps a warp.
    const uint32_t t_base = smem_addr(is_a ? Tw : Tu), b_base = smem_addr(is_a ? Kb : Vb);
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
}

// ---- 2. scan

// One stage of the scan's double buffer, images of the scratch tiles (swizzled, piece_at):
// W and K (bf16 [C][D]), the block's columns of U (f32 [C][kCols], kCols / kBV of U's
// tiles), e^gamma and e^(gamma_last - gamma) (f32 [C] each); when the scan also computes the
// output (kFold), Q (bf16 [C][D]) and P (bf16 [C][C]) after them. Then the state, V' and its
// decayed copy (padded bf16 tiles the block writes itself) and the stages' two barriers.
template <bool kFold, int kCols>
struct ScanLayout {
  static constexpr int kAtK = kC * kD * 2, kAtU = 2 * kC * kD * 2, kAtE = kAtU + kC * kCols * 4;
  static constexpr int kAtQ = kAtE + 2 * kC * 4, kAtP = kAtQ + kC * kD * 2;
  static constexpr int kStage = kFold ? kAtP + kC * kC * 2 : kAtQ;  // bytes, also a stage's copies
  static constexpr int kRowS = (kCols + 8) * 2;  // the padded state and V' tiles' row stride
  static constexpr int kSmem = 2 * kStage + kD * kRowS + 2 * kC * kRowS + 2 * 8;
  static_assert(kStage % 128 == 0 && kAtU % 128 == 0 && kAtQ % 128 == 0, "swizzled tiles start on 128-byte lines");
};
static_assert(kOffEd == kOffEg + kC * 4, "e^gamma and e^(gamma_last - gamma) adjoin in scratch, one copy");
static_assert(ScanLayout<false, kBV>::kSmem <= kTwoPerSm);           // 101 KB: two blocks an SM
static_assert(ScanLayout<true, 2 * kBV>::kSmem <= 227 * 1024 - 1024);  // 181 KB (32 columns: 149 KB): one

// One block per (sequence, value head, kCols state columns). kFold: the block also computes
// its output columns of every chunk, O = e^gamma (Q S) + P V', from the state and V' it
// already holds; the chunk's state and V' then never go to scratch and the output kernel is
// not launched. Folded, it runs one block an SM (8 of its 64 warp slots: the chunk step is a
// chain of dependent latencies with issue slots to spare; docs/bench-log, "The output
// folded into the scan"), so it is chosen when the blocks fit the SMs: 32 columns a block when
// four a head fit (the 9B's 32 heads), else 64 when two do (the 27B's 48: each warp then
// carries twice the columns), else the unfolded 32-column kernel two an SM.
template <bool kFold, int kCols, class State>
__global__ void __launch_bounds__(kThreads, kFold ? 1 : 2) deltanet_tc_scan_kernel(const DeltaNetArgs a, const DeltaNetChunkItem* items,
                                                                     const DeltaNetChunkSeq* chunk_seqs, float* scratch,
                                                                     int group) {
  using L = ScanLayout<kFold, kCols>;
  constexpr int kStage = L::kStage, kRowS = L::kRowS;
  constexpr int kNT = kCols / 8;   // n-tiles of the state rows a warp carries
  constexpr int kWN = kCols / 16;  // n-tiles of V' and the output a warp computes
  static_assert(kCols % kBV == 0 && (kFold || kCols == kBV));
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* Ss = smem + 2 * kStage;  // [D][kRowS] the state, bf16
  uint8_t* Vs = Ss + kD * kRowS;    // [C][kRowS] V', bf16
  uint8_t* Vd = Vs + kC * kRowS;    // [C][kRowS] e^(gamma_last - gamma) V', bf16
  const uint32_t bars = smem_addr(Vd + kC * kRowS);  // a stage's bytes have landed
  auto stage = [&](int n) { return smem + (n & 1) * kStage; };  // W, K, U, Eg, Ed (, Q, P)

  const int tile = blockIdx.x, j = blockIdx.y, owner = owner_of(j, group);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  wait_for_previous_kernel();
  const DeltaNetChunkSeq cs = chunk_seqs[blockIdx.z];
  const DevSeq sq = a.seqs[cs.seq];
  State* const states = static_cast<State*>(a.state);
  State* S = states + ((static_cast<int64_t>(sq.state_slot) * a.n_layers + a.layer) * a.v_heads + j) * kD * kD +
             tile * kCols;

  // A stage is four or six bulk copies of whole tiles, issued by one thread, that complete on
  // the stage's barrier (as cp.async pieces, 14 a thread, their issue was a fifth of the chunk
  // step's stalls: docs/bench-log, "Prepare and the folded scan under ncu").
  auto load_stage = [&](int n) {
    const uint8_t* src = scratch_of(scratch, cs.first_item + n, a.v_heads, j);
    const uint8_t* shared = scratch_of(scratch, cs.first_item + n, a.v_heads, owner);  // K, Q
    const uint32_t dst = smem_addr(stage(n)), bar = bars + 8 * (n & 1);
    mbar_arrive_expect_tx(bar, kStage);
    bulk_copy(dst, src + kOffW, kC * kD * 2, bar);
    bulk_copy(dst + L::kAtK, shared + kOffK, kC * kD * 2, bar);
    bulk_copy(dst + L::kAtU, src + kOffU + tile * (kC * kCols * 4), kC * kCols * 4, bar);
    bulk_copy(dst + L::kAtE, src + kOffEg, 2 * kC * 4, bar);
    if constexpr (kFold) {
      bulk_copy(dst + L::kAtQ, shared + kOffQ, kC * kD * 2, bar);
      bulk_copy(dst + L::kAtP, src + kOffP, kC * kC * 2, bar);
    }
  };
  if (tid == 0) {
    mbar_init(bars, 1);
    mbar_init(bars + 8, 1);
    mbar_fence_init();
    load_stage(0);
  }
  __syncthreads();  // the barriers initialised

  // The state tile in mma accumulator layout: warp w holds rows 16w .. 16w+15 (dk), n-tile n
  // columns 8n .. 8n+7; s[n][0..1] at row 16w + g, s[n][2..3] at row 16w + g + 8.
  float s[kNT][4];
#pragma unroll
  for (int n = 0; n < kNT; ++n) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 v = state_load2(S + static_cast<int64_t>(16 * warp + g + 8 * h) * kD + 8 * n + 2 * c);
      s[n][2 * h] = v.x;
      s[n][2 * h + 1] = v.y;
    }
  }

  const uint32_t ss_base = smem_addr(Ss), vs_base = smem_addr(Vs), vd_base = smem_addr(Vd);
  // The state tile to `to` (the sequence's slot at the end, a snapshot slot on the way).
  auto store_state = [&](State* to) {
#pragma unroll
    for (int n = 0; n < kNT; ++n) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        state_store2(to + static_cast<int64_t>(16 * warp + g + 8 * h) * kD + 8 * n + 2 * c, s[n][2 * h], s[n][2 * h + 1]);
    }
  };
  // Each chunk's item (its snapshot slot; with kFold its rows) and decay are read one chunk
  // ahead: read at the top of the chunk, their global round trip (the decay's from DRAM:
  // prepare wrote it long before) sat at the head of the serial chain.
  auto item_of = [&](int n) { return n < cs.n_items ? items[cs.first_item + n] : DeltaNetChunkItem{0, 0, 0, -1}; };
  auto decay_of = [&](int n) {
    return n < cs.n_items ? *reinterpret_cast<const float*>(scratch_of(scratch, cs.first_item + n, a.v_heads, j) + kOffDecay)
                          : 0.0f;
  };
  DeltaNetChunkItem next_item = item_of(0);
  float next_decay = decay_of(0);
  // Warp w's share of V' = U - W S and of the output: tokens 16 (w % 4) .., n-tiles nb ..
  // nb + kWN - 1 of the block's columns.
  const int mt = warp & 3, nb = kWN * (warp >> 2);
  for (int n = 0; n < cs.n_items; ++n) {
    const DeltaNetChunkItem it = next_item;
    const float decay = next_decay;
    next_item = item_of(n + 1);
    next_decay = decay_of(n + 1);
    if (it.snapshot_slot >= 0)
      store_state(states + ((static_cast<int64_t>(it.snapshot_slot) * a.n_layers + a.layer) * a.v_heads + j) * kD * kD +
                  tile * kCols);
    uint8_t* scr = scratch_of(scratch, cs.first_item + n, a.v_heads, j);
    // The state as the B operand of W S, in bf16.
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        *reinterpret_cast<uint32_t*>(Ss + (16 * warp + g + 8 * h) * kRowS + (8 * nt + 2 * c) * 2) =
            pack_bf16(s[nt][2 * h], s[nt][2 * h + 1]);
    }
    mbar_wait(bars + 8 * (n & 1), (n >> 1) & 1);  // this chunk's stage in
    __syncthreads();  // Ss written; every warp done with the other stage and Vs
    if (tid == 0 && n + 1 < cs.n_items) load_stage(n + 1);

    // V' = U - W S (and with kFold Q S on the same state fragments), the even and odd k-steps
    // in their own accumulators: two chains of four mma instead of one of eight.
    const uint8_t* st = stage(n);
    const uint32_t w_base = smem_addr(st), k_base = smem_addr(st + L::kAtK);
    const uint32_t q_base = smem_addr(st + L::kAtQ), p_base = smem_addr(st + L::kAtP);
    const uint8_t* Us = st + L::kAtU;
    const float* Ed = reinterpret_cast<const float*>(st + L::kAtE + kC * 4);
    float qs[2][kWN][4];  // Q S, kFold only
    {
      float ws[2][kWN][4];
#pragma unroll
      for (int e = 0; e < 2 * kWN; ++e) {
        ws[e / kWN][e % kWN][0] = ws[e / kWN][e % kWN][1] = ws[e / kWN][e % kWN][2] = ws[e / kWN][e % kWN][3] = 0.0f;
        qs[e / kWN][e % kWN][0] = qs[e / kWN][e % kWN][1] = qs[e / kWN][e % kWN][2] = qs[e / kWN][e % kWN][3] = 0.0f;
      }
      // With kFold, fragments several k-steps at a time ahead of their products: the ldmatrix
      // and mma wrappers are volatile asm, which the compiler keeps in source order, so a load
      // written next to its product exposes its latency every k-step. Two blocks an SM (the
      // unfolded kernel) hide it, and there the grouping measured slower; 64 columns a block
      // load twice the state fragments a k-step, so two k-steps ahead there.
      constexpr int kAhead = kFold ? 4 * kBV / kCols : 1;
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
      // V' to Vs (for P V' and the output pass) and, scaled by its rows' decay to the chunk's
      // end, to Vd (for the state update).
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
    __syncthreads();  // Vs, Vd written
    if constexpr (!kFold) {
      // V' for the output pass: 64 rows of 64 bytes.
      for (int i = tid; i < kC * (kCols * 2 / 16); i += kThreads) {
        const int r = i / (kCols * 2 / 16), q = i % (kCols * 2 / 16);
        *reinterpret_cast<uint4*>(scr + kOffVn + r * kD * 2 + tile * kCols * 2 + q * 16) =
            *reinterpret_cast<const uint4*>(Vs + r * kRowS + q * 16);
      }
    }

    // S = e^gamma_last S + Kᵀ diag(e^(gamma_last - gamma)) V': warp w's rows 16w .. (dk) over
    // the chunk's 64 tokens; with kFold, P V' (the warp's tokens and columns; P is lower
    // triangular, so k-steps up to the warp's own).
    float po[kWN][4];
#pragma unroll
    for (int e = 0; e < kWN; ++e) po[e][0] = po[e][1] = po[e][2] = po[e][3] = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) s[nt][0] *= decay, s[nt][1] *= decay, s[nt][2] *= decay, s[nt][3] *= decay;
    constexpr int kAheadU = kFold ? 2 * kBV / kCols : 1;  // fragments ahead with kFold, as above
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
    if constexpr (kFold) {
      // O = diag(e^gamma) Q S + P V' for the warp's tokens of the chunk (padded rows dropped).
      const float* Eg = reinterpret_cast<const float*>(st + L::kAtE);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * mt + g + 8 * h;
        if (r >= it.len) continue;
        const float eg = Eg[r];
        float* dst = a.out + ((static_cast<int64_t>(it.row0) + r) * a.v_heads + j) * kD + tile * kCols + 8 * nb + 2 * c;
#pragma unroll
        for (int e = 0; e < kWN; ++e)
          *reinterpret_cast<float2*>(dst + 8 * e) = make_float2(eg * (qs[0][e][2 * h] + qs[1][e][2 * h]) + po[e][2 * h],
                                                                eg * (qs[0][e][2 * h + 1] + qs[1][e][2 * h + 1]) + po[e][2 * h + 1]);
      }
    }
  }
  store_state(S);
}

// ---- 3. output

constexpr int kOutSmem = kC * kD * 2 + kC * kC * 2 + kD * kRowD + kC * kRowD;  // 75 KB
static_assert(kOutSmem <= kTwoPerSm);

__global__ void __launch_bounds__(kThreads, 2) deltanet_tc_output_kernel(const DeltaNetArgs a, const DeltaNetChunkItem* items,
                                                                       float* scratch, int group) {
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* Qs = smem;                // [C][D] swizzled, as in scratch
  uint8_t* Ps = Qs + kC * kD * 2;    // [C][C] swizzled
  uint8_t* Sn = Ps + kC * kC * 2;    // [D][kRowD]
  uint8_t* Vn = Sn + kD * kRowD;     // [C][kRowD]
  const int j = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  wait_for_previous_kernel();
  const DeltaNetChunkItem it = items[blockIdx.x];
  const uint8_t* src = scratch_of(scratch, blockIdx.x, a.v_heads, j);
  copy_rows(smem_addr(Qs), kD * 2, scratch_of(scratch, blockIdx.x, a.v_heads, owner_of(j, group)) + kOffQ, kD * 2, kC,
            kD * 2);
  copy_rows(smem_addr(Ps), kC * 2, src + kOffP, kC * 2, kC, kC * 2);
  copy_rows(smem_addr(Sn), kRowD, src + kOffS, kD * 2, kD, kD * 2);
  copy_rows(smem_addr(Vn), kRowD, src + kOffVn, kD * 2, kC, kD * 2);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // Warp w: tokens 16 (w % 4) .., columns 64 (w / 4) .. + 63.
  const int mt = warp & 3, n0 = 64 * (warp >> 2), g = lane >> 2, c = lane & 3;
  float o[8][4];
#pragma unroll
  for (int n = 0; n < 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  const uint32_t q_base = smem_addr(Qs), p_base = smem_addr(Ps), s_base = smem_addr(Sn), v_base = smem_addr(Vn);
  mma_rows_by_64<true>(o, q_base, kD * 2, 16 * mt, s_base, kRowD, n0, kD / 16);  // Q S over dk
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // its rows scaled by e^gamma
    const float eg = reinterpret_cast<const float*>(src + kOffEg)[16 * mt + g + 8 * h];
#pragma unroll
    for (int n = 0; n < 8; ++n) o[n][2 * h] *= eg, o[n][2 * h + 1] *= eg;
  }
  mma_rows_by_64<true>(o, p_base, kC * 2, 16 * mt, v_base, kRowD, n0, mt + 1);  // P V' over tokens <= the rows' (P is lower)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = 16 * mt + g + 8 * h;
    if (i >= it.len) continue;
    float* dst = a.out + ((static_cast<int64_t>(it.row0) + i) * a.v_heads + j) * kD + n0 + 2 * c;
#pragma unroll
    for (int n = 0; n < 8; ++n) *reinterpret_cast<float2*>(dst + 8 * n) = make_float2(o[n][2 * h], o[n][2 * h + 1]);
  }
}

template <class State>
void set_scan_attributes() {
  check_cuda(cudaFuncSetAttribute(deltanet_tc_scan_kernel<false, kBV, State>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, ScanLayout<false, kBV>::kSmem),
             "gated_delta_rule tensor-core scan kernel attribute");
  check_cuda(cudaFuncSetAttribute(deltanet_tc_scan_kernel<true, kBV, State>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  ScanLayout<true, kBV>::kSmem),
             "gated_delta_rule tensor-core scan kernel (output folded in) attribute");
  check_cuda(cudaFuncSetAttribute(deltanet_tc_scan_kernel<true, 2 * kBV, State>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, ScanLayout<true, 2 * kBV>::kSmem),
             "gated_delta_rule tensor-core scan kernel (output folded in, 64 columns) attribute");
}

}  // namespace

void deltanet_chunked_tc(const DeltaNetArgs& a, const DeltaNetChunkItem* items, int32_t n_items,
                         const DeltaNetChunkSeq* chunk_seqs, int32_t n_chunk_seqs, float* scratch, int32_t n_sms,
                         Stream stream) {
  static const bool attributes_set = [] {
    check_cuda(cudaFuncSetAttribute(deltanet_tc_prepare_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    kPrepFixedSmem + kMaxGroup * kPrepGatesSmem),
               "gated_delta_rule tensor-core prepare kernel attribute");
    set_scan_attributes<float>();
    set_scan_attributes<__nv_bfloat16>();
    check_cuda(cudaFuncSetAttribute(deltanet_tc_output_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kOutSmem),
               "gated_delta_rule tensor-core output kernel attribute");
    return true;
  }();
  (void)attributes_set;
  const dim3 per_chunk(static_cast<unsigned>(n_items), static_cast<unsigned>(a.v_heads));
  const int group = prepare_group(a.k_heads, a.v_heads);
  launch_dependent("deltanet_tc_prepare_kernel", deltanet_tc_prepare_kernel,
                   dim3(static_cast<unsigned>(n_items), static_cast<unsigned>(a.v_heads / group)), kThreads,
                   kPrepFixedSmem + group * kPrepGatesSmem, stream, a, items, scratch, group);
  // The scan is launched plainly, not chained: chained, its blocks (fewer than the SMs when
  // folded) are placed while the prepare kernel drains, and the layer ran ~20% slower with 32
  // value heads (docs/bench-log, "The DeltaNet scan's launch"); a plain launch spreads them
  // over the idle SMs. The folded kernel needs an SM's shared memory to itself, so it runs when
  // its blocks fit the SMs one each: 32 columns a block if four a head fit, else 64 if two do;
  // otherwise the unfolded one runs two an SM and the output kernel follows.
  const Stream plain{stream.handle, false};
  const int64_t heads = int64_t{a.v_heads} * n_chunk_seqs;
  const auto grid = [&](int cols) {
    return dim3(static_cast<unsigned>(kD / cols), static_cast<unsigned>(a.v_heads), static_cast<unsigned>(n_chunk_seqs));
  };
  bool folded = true;
  with_state_type(a, [&](auto* state) {
    using State = std::remove_pointer_t<decltype(state)>;
    if (heads * (kD / kBV) <= n_sms) {
      launch_dependent("deltanet_tc_scan_kernel (output folded in)", deltanet_tc_scan_kernel<true, kBV, State>,
                       grid(kBV), kThreads, ScanLayout<true, kBV>::kSmem, plain, a, items, chunk_seqs, scratch, group);
    } else if (heads * (kD / (2 * kBV)) <= n_sms) {
      launch_dependent("deltanet_tc_scan_kernel (output folded in, 64 columns)",
                       deltanet_tc_scan_kernel<true, 2 * kBV, State>, grid(2 * kBV), kThreads,
                       ScanLayout<true, 2 * kBV>::kSmem, plain, a, items, chunk_seqs, scratch, group);
    } else {
      launch_dependent("deltanet_tc_scan_kernel", deltanet_tc_scan_kernel<false, kBV, State>, grid(kBV), kThreads,
                       ScanLayout<false, kBV>::kSmem, plain, a, items, chunk_seqs, scratch, group);
      folded = false;
    }
  });
  if (!folded)
    launch_dependent("deltanet_tc_output_kernel", deltanet_tc_output_kernel, per_chunk, kThreads, kOutSmem, stream, a,
                     items, scratch, group);
}

}  // namespace ds::cuda::ops::delta
