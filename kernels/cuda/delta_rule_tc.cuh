// The chunked gated delta rule on the tensor cores (what production runs for prefill chunks;
// the fp32 version for the f32 reference mode is in delta_rule.cu): its three kernels. The maths is the WY form
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
// mma.sync m16n8k16 fragments come from ldmatrix (mma_sync.cuh): tiles a kernel writes to
// shared memory itself are row-major with rows padded by 16 bytes (row strides of 80, 144 and
// 272 bytes put the eight rows an ldmatrix reads in distinct bank groups); the tiles prepare
// hands the scan through scratch are unpadded and swizzled instead (piece_at), so they travel
// as whole-tile bulk copies.
//
// The kernels below are thin: each is its pass's stages in order, from delta_rule_tc_prepare.cuh,
// delta_rule_tc_scan.cuh and delta_rule_tc_output.cuh, over the layouts of
// delta_rule_tc_layout.cuh and the tile operations of delta_rule_tc_fragments.cuh. The
// launcher (which kernels run, with what grid) is delta_rule_tc.cu; tests/kernels_cuda_emu runs
// these same sources on the CPU through an emulation of the warp-level instructions.
#pragma once

#include <cstdint>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/delta_rule_tc_output.cuh"
#include "kernels/cuda/delta_rule_tc_prepare.cuh"
#include "kernels/cuda/delta_rule_tc_scan.cuh"

namespace ds::cuda::ops::delta {
namespace {

// ---- 1. prepare, one block per (chunk, group of value heads sharing a key head)
__global__ void __launch_bounds__(kThreads, 2) deltanet_tc_prepare_kernel(const DeltaNetArgs a,
                                                                        const DeltaNetChunkItem* items,
                                                                        float* scratch, int group) {
  extern __shared__ __align__(16) uint8_t smem[];
  const PrepareSmem sm(smem);
  wait_for_previous_kernel();
  const PrepareBlock b(a, items[blockIdx.x], scratch, group);
  // Every global read of the first head is issued up front, so the loads overlap the gates'
  // double-precision maths instead of following it one dependent step at a time: v by
  // cp.async, each warp's eight rows of q and k into registers.
  load_v(sm.Vf, a, b.it, b.j0);
  QkRows qk;
  load_qk_rows(a, b, qk);
  gates_and_decays(a, b, sm.G);
  normalise_qk(a, b, qk, sm);
  float raw[8][4];
  raw_products(raw, sm);
#pragma unroll 1
  for (int h = 0; h < group; ++h) prepare_head(a, b, h, raw, sm);
}

// ---- 2. scan
// One block per (sequence, value head, kCols state columns). kFold: the block also computes
// its output columns of every chunk, O = e^gamma (Q S) + P V', from the state and V' it
// already holds; the chunk's state and V' then never go to scratch and the output kernel is
// not launched. Folded, it runs one block an SM (8 of its 64 warp slots: the chunk step is a
// chain of dependent latencies with issue slots to spare; docs/bench-log, "The output
// folded into the scan"), so it is chosen when the blocks fit the SMs: 32 columns a block when
// four a head fit (the 9B's 32 heads), else 64 when two do (the 27B's 48: each warp then
// carries twice the columns), else the unfolded 32-column kernel two an SM.
template <bool kFold, int kCols, class State>
__global__ void __launch_bounds__(kThreads, kFold ? 1 : 2)
    deltanet_tc_scan_kernel(const DeltaNetArgs a, const DeltaNetChunkItem* items, const DeltaNetChunkSeq* chunk_seqs,
                            float* scratch, int group) {
  using Block = ScanBlock<kFold, kCols, State>;
  extern __shared__ __align__(16) uint8_t smem[];
  Block sb(smem, a, items, scratch, group);
  wait_for_previous_kernel();
  sb.read_sequence(chunk_seqs);
  sb.start();
  float s[Block::kNT][4];
  sb.load_state(s);
  DeltaNetChunkItem next_item = sb.item_of(0);
  float next_decay = sb.decay_of(0);
  for (int n = 0; n < sb.cs.n_items; ++n) {
    const DeltaNetChunkItem it = next_item;
    const float decay = next_decay;
    next_item = sb.item_of(n + 1);
    next_decay = sb.decay_of(n + 1);
    if (it.snapshot_slot >= 0) sb.store_state(s, sb.state_of(it.snapshot_slot));
    uint8_t* scr = sb.scratch_at(n, sb.j);
    sb.state_operand(s);
    mbar_wait(sb.bars + 8 * (n & 1), (n >> 1) & 1);  // this chunk's stage in
    __syncthreads();  // Ss written; every warp done with the other stage and Vs
    if (sb.tid == 0 && n + 1 < sb.cs.n_items) sb.load_stage(n + 1);
    float qs[2][Block::kWN][4];  // Q S, kFold only
    sb.new_values(n, scr, qs);
    __syncthreads();  // Vs, Vd written
    if constexpr (!kFold) sb.values_to_scratch(scr);
    float po[Block::kWN][4];  // P V', kFold only
    sb.update_state(n, decay, s, po);
    if constexpr (kFold) sb.write_output(n, it, qs, po);
  }
  sb.store_state(s, sb.S);
}

// ---- 3. output, one block per (chunk, value head), when the scan does not fold it in
__global__ void __launch_bounds__(kThreads, 2) deltanet_tc_output_kernel(const DeltaNetArgs a,
                                                                       const DeltaNetChunkItem* items,
                                                                       float* scratch, int group) {
  extern __shared__ __align__(16) uint8_t smem[];
  const OutputSmem sm(smem);
  const int j = static_cast<int>(blockIdx.y);
  wait_for_previous_kernel();
  const DeltaNetChunkItem it = items[blockIdx.x];
  const uint8_t* src = scratch_of(scratch, blockIdx.x, a.v_heads, j);
  load_output_tiles(sm, src, scratch_of(scratch, blockIdx.x, a.v_heads, owner_of(j, group)));
  output_rows(a, it, j, sm, src);
}

}  // namespace
}  // namespace ds::cuda::ops::delta
