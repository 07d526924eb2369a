// Where the tensor-core chunked delta rule's kernels (delta_rule_tc.cuh) keep things: the
// per-chunk scratch that prepare hands the scan and the output pass, the shared-memory layouts
// of the three kernels, and the tile indexing they share. Included by delta_rule_tc.cu only.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/delta_rule_common.cuh"

namespace ds::cuda::ops::delta {
namespace {

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
static_assert(kOffEd == kOffEg + kC * 4, "e^gamma and e^(gamma_last - gamma) adjoin in scratch, one copy");

// Padded row strides (bytes) of the bf16 tiles in shared memory.
constexpr int kRowD = (kD + 8) * 2;     // 128 columns: 272
constexpr int kRowC = (kC + 8) * 2;     // 64 columns: 144
// Each kernel is sized for two blocks per SM (228 KB of shared memory, 1 KB reserved per block).
constexpr int kTwoPerSm = 113 * 1024;

// ---- prepare: one block per (chunk, group of value heads that share a key head)
constexpr int kBlk = 16;  // the inverse's diagonal blocks
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

struct PrepareSmem {
  uint8_t* Kb;  // [C][kRowD] normalised k, bf16
  uint8_t* Qb;  // [C][kRowD] normalised, scaled q, bf16; then v (Vb)
  float* Vf;    // [C][D] the next head's v, f32
  float* T;     // [C][kAT] (I + A)^-1
  float* A;     // [C][kAT]
  float* M;     // [3][16][16]
  uint8_t* Tw;  // [C][kRowC] T diag(beta e^gamma), bf16 (where A was, after the inverse)
  uint8_t* Tu;  // [C][kRowC] T diag(beta), bf16
  float* G;     // per head: gamma, beta, e^gamma, e^(gamma_last - gamma)
  uint8_t* Vb;  // v in bf16, where Qb was

  __device__ __forceinline__ explicit PrepareSmem(uint8_t* smem)
      : Kb(smem),
        Qb(Kb + kC * kRowD),
        Vf(reinterpret_cast<float*>(Qb + kC * kRowD)),
        T(Vf + kC * kD),
        A(T + kC * kAT),
        M(A + kC * kAT),
        Tw(reinterpret_cast<uint8_t*>(A)),
        Tu(Tw + kC * kRowC),
        G(M + 3 * kBlk * kBlk),
        Vb(Qb) {}
};

// Value heads per prepare block: the key head's whole group when it has at most kMaxGroup,
// else its largest divisor that does.
int prepare_group(int k_heads, int v_heads) {
  const int ratio = v_heads / k_heads;
  int g = std::min(ratio, kMaxGroup);
  while (ratio % g != 0) --g;
  return g;
}

// ---- scan: one block per (sequence, value head, kCols state columns)
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
static_assert(ScanLayout<false, kBV>::kSmem <= kTwoPerSm);           // 101 KB: two blocks an SM
static_assert(ScanLayout<true, 2 * kBV>::kSmem <= 227 * 1024 - 1024);  // 181 KB (32 columns: 149 KB): one

// ---- output: one block per (chunk, value head)
constexpr int kOutSmem = kC * kD * 2 + kC * kC * 2 + kD * kRowD + kC * kRowD;  // 75 KB
static_assert(kOutSmem <= kTwoPerSm);

// The scratch of (chunk item, value head j).
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

}  // namespace
}  // namespace ds::cuda::ops::delta
