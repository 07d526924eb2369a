// The Gated DeltaNet core of the CUDA backend: gates, L2 norms and the delta rule over the
// recurrent state in the StatePool slots (fp32 or bf16 there, fp32 in the kernels:
// delta_rule_common.cuh), for every sequence of a step in one batched launch per path
// (backend.h states the maths; dk = dv = 128 here).
//
// Token by token (decode, and chunks of a few tokens): one thread block per (sequence, value
// head, 32 state columns; 64 with bf16 slots); thread (lane c, warp w) keeps S[32w .. 32w+31][c]
// (and column c + 1 with bf16) in registers for the whole chunk, the decay, the delta
// correction and the read with q reduce over the four warps through shared memory. A verify
// chunk's row-state slots get S after each of its first rows, and snapshot slots S after their
// snapshot rows, stored from the same registers.
//
// Chunked (prefill chunks longer than kDeltaNetRecurrentMaxTokens), the WY form of kernel-notes
// 3.2 / model spec 3.6 with C = 64. Production runs it on the tensor cores (delta_rule_tc.cu);
// this file holds the fp32 version, which the f32-weight reference mode runs, in two launches:
//  1. prepare, one block per (chunk, value head), all chunks in parallel: gates and their
//     in-chunk cumulative sum gamma, L2-normalised K and scaled Q, A = strict-lower(beta_i k_i·k_j
//     e^(gamma_i - gamma_j)), then W = (I + A)^-1 (beta e^gamma K) and U = (I + A)^-1 (beta V) by
//     forward substitution (each thread owns one column, in registers), and
//     P = lower-incl(Q Kᵀ ⊙ e^(gamma_i - gamma_j)). Written to scratch in the layouts the scan reads
//     with broadcast 16-byte loads: Wt, (e^gamma Q)ᵀ, e^(gamma_last - gamma) K, U, Pᵀ, e^gamma_last.
//  2. scan, one block per (sequence, value head, 32 state columns), chunks in order with the
//     state tile in shared memory: V' = U - W S; O = (e^gamma Q) S + P V'; S = e^gamma_last S +
//     (e^(gamma_last - gamma) K)ᵀ V'. An item that carries a snapshot slot (it starts right
//     after a snapshot row: append_chunk_items) first stores the state it starts from there.
// Padded rows of a short last chunk have beta = g = 0 and zero q, k, v, so they change nothing.
// All arithmetic is fp32 (the scalar gates in double, as the CPU backend computes them), so
// a prefilled state equals the token-by-token one to fp32 rounding.
#include <type_traits>

#include "kernels/cuda/backend_common.cuh"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/delta_rule_common.cuh"

namespace ds::cuda::ops::delta {

// One column of X = (I + A)^-1 B by forward substitution: x_i = b_i - sum_{j<i} A_ij x_j, with A
// strictly lower triangular, [C][C] row-major in shared memory (every thread of a warp reads
// the same element: a broadcast), b_i = rhs(i), x in registers.
template <class Rhs>
__device__ __forceinline__ void forward_substitute(const float* A, Rhs rhs, float (&x)[kC]) {
#pragma unroll
  for (int i = 0; i < kC; ++i) {
    float acc = rhs(i);
#pragma unroll
    for (int jj = 0; jj < i; ++jj) acc -= A[i * kC + jj] * x[jj];
    x[i] = acc;
  }
}

}  // namespace ds::cuda::ops::delta

namespace ds::cuda::ops {
namespace {

using delta::Gates;
using delta::gates;
using delta::kC;
using delta::kD;
using delta::q_scale;
using delta::state_load;
using delta::state_load2;
using delta::state_store;
using delta::state_store2;
using delta::with_state_type;
constexpr int kPad = kD + 1;   // padded row stride of K and Q in the prepare kernel

// ---- token by token

// kCpt adjacent state columns per thread, loaded and stored together, so a warp's access to a
// state row is 128 bytes or more whatever the element type: 1 for fp32 slots, 2 for bf16
// (one column of bf16 is 64 bytes a warp, and the bf16 step ran at well under the copy rate:
// docs/bench-log, "A bf16 recurrent state").
template <class State>
constexpr int recurrent_columns() {
  return sizeof(State) == 2 ? 2 : 1;
}

template <int kCpt, class State>
__device__ __forceinline__ void load_columns(const State* p, float (&v)[kCpt]) {
  if constexpr (kCpt == 1) {
    v[0] = state_load(p);
  } else {
    const float2 t = state_load2(p);
    v[0] = t.x;
    v[1] = t.y;
  }
}

template <int kCpt, class State>
__device__ __forceinline__ void store_columns(State* p, const float (&v)[kCpt]) {
  if constexpr (kCpt == 1) {
    state_store(p, v[0]);
  } else {
    state_store2(p, v[0], v[1]);
  }
}

// One block per (sequence, value head, 32 kCpt state columns); thread (lane, warp) keeps
// rows 32 warp .. 32 warp + 31 of columns kCpt (32 tile + lane) .. + kCpt - 1. The step is a
// stream of state tiles, loaded before the wait for the previous kernel, so its rate follows
// the bytes in flight: the two-column form asks for four blocks an SM, which caps it at 128
// registers (it would take 160 and fit three); the one-column form sets no minimum (80
// registers, six blocks).
template <class State>
__global__ void __launch_bounds__(128, recurrent_columns<State>() == 2 ? 4 : 0)
    deltanet_recurrent_kernel(const DeltaNetArgs a, const int32_t* seq_ids) {
  constexpr int kCpt = recurrent_columns<State>();
  __shared__ float qs[kD], ks[kD];
  __shared__ float part[4][32 * kCpt];
  __shared__ float red[32];
  const int tile = blockIdx.x, j = blockIdx.y;
  const DevSeq sq = a.seqs[seq_ids[blockIdx.z]];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int col = (tile * 32 + lane) * kCpt;  // the thread's first column
  const int kh = j / (a.v_heads / a.k_heads);
  const int64_t key_dim = static_cast<int64_t>(a.k_heads) * kD;
  const int64_t conv_dim = 2 * key_dim + static_cast<int64_t>(a.v_heads) * kD;
  State* const states = static_cast<State*>(a.state);
  State* S = states + ((static_cast<int64_t>(sq.state_slot) * a.n_layers + a.layer) * a.v_heads + j) * kD * kD;
  float s[32][kCpt];
#pragma unroll
  for (int r = 0; r < 32; ++r) load_columns<kCpt>(S + static_cast<int64_t>(warp * 32 + r) * kD + col, s[r]);
  // The plan (seqs, seq_ids) was uploaded at the start of the step and this layer's state was
  // last written by this kernel a step ago, both finished long before the kernel just ahead
  // of this one (see launch_dependent), so the state loads above overlap that kernel's tail;
  // qkv, a and b are its results.
  wait_for_previous_kernel();

  int32_t next_snapshot = 0;
  for (int32_t t = 0; t < sq.n_tokens; ++t) {
    const int64_t row = static_cast<int64_t>(sq.first_row) + t;
    const float* x = a.qkv + row * conv_dim;
    const float qv = x[kh * kD + tid], kv = x[key_dim + kh * kD + tid];
    const float sum_q = block_sum(qv * qv, red);
    const float sum_k = block_sum(kv * kv, red);
    qs[tid] = (qv * (1.0f / sqrtf(sum_q + 1e-6f))) * q_scale();
    ks[tid] = kv * (1.0f / sqrtf(sum_k + 1e-6f));
    const Gates gt = gates(a, row, j);
    __syncthreads();

    float u[kCpt] = {};
#pragma unroll
    for (int r = 0; r < 32; ++r) {
#pragma unroll
      for (int c = 0; c < kCpt; ++c) {
        s[r][c] *= gt.decay;
        u[c] += ks[warp * 32 + r] * s[r][c];
      }
    }
#pragma unroll
    for (int c = 0; c < kCpt; ++c) part[warp][lane * kCpt + c] = u[c];
    __syncthreads();
    float delta[kCpt];
#pragma unroll
    for (int c = 0; c < kCpt; ++c) {
      const int i = lane * kCpt + c;
      const float u_c = part[0][i] + part[1][i] + part[2][i] + part[3][i];
      delta[c] = (x[2 * key_dim + static_cast<int64_t>(j) * kD + col + c] - u_c) * gt.beta;
    }
    float o[kCpt] = {};
#pragma unroll
    for (int r = 0; r < 32; ++r) {
#pragma unroll
      for (int c = 0; c < kCpt; ++c) {
        s[r][c] += ks[warp * 32 + r] * delta[c];
        o[c] += qs[warp * 32 + r] * s[r][c];
      }
    }
    __syncthreads();  // every warp has read part (u)
#pragma unroll
    for (int c = 0; c < kCpt; ++c) part[warp][lane * kCpt + c] = o[c];
    __syncthreads();
    if (warp == 0) {
#pragma unroll
      for (int c = 0; c < kCpt; ++c) {
        const int i = lane * kCpt + c;
        a.out[(row * a.v_heads + j) * kD + col + c] = part[0][i] + part[1][i] + part[2][i] + part[3][i];
      }
    }
    int64_t slot = t < sq.n_row_states ? a.row_state_slots[sq.row_state_begin + t] : -1;
    if (next_snapshot < sq.n_snapshots && a.snapshots[sq.snapshot_begin + next_snapshot].row == t)
      slot = a.snapshots[sq.snapshot_begin + next_snapshot++].slot;
    if (slot >= 0) {
      State* R = states + ((slot * a.n_layers + a.layer) * a.v_heads + j) * kD * kD;
#pragma unroll
      for (int r = 0; r < 32; ++r) store_columns<kCpt>(R + static_cast<int64_t>(warp * 32 + r) * kD + col, s[r]);
    }
    __syncthreads();  // part, qs and ks are rewritten by the next token
  }
#pragma unroll
  for (int r = 0; r < 32; ++r) store_columns<kCpt>(S + static_cast<int64_t>(warp * 32 + r) * kD + col, s[r]);
}

// ---- chunked: prepare

constexpr int64_t kOffWt = 0;
constexpr int64_t kOffQgt = kOffWt + kD * kC;
constexpr int64_t kOffKd = kOffQgt + kD * kC;
constexpr int64_t kOffU = kOffKd + kC * kD;
constexpr int64_t kOffPt = kOffU + kC * kD;
constexpr int64_t kOffDecay = kOffPt + kC * kC;
static_assert(kOffDecay + 4 == kDeltaNetScratchFloats, "scratch layout");

constexpr int kPrepareSmemFloats = 2 * kC * kPad + kC * kC + 4 * kC + 2 * kC;  // ~84 KB: two blocks per SM
constexpr int kPrepareSmem = kPrepareSmemFloats * 4;

__global__ void __launch_bounds__(256) deltanet_prepare_kernel(const DeltaNetArgs a, const DeltaNetChunkItem* items, float* scratch) {
  wait_for_previous_kernel();
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  float* Kn = sm;               // [C][kPad]
  float* Qs = Kn + kC * kPad;   // [C][kPad]
  float* A = Qs + kC * kPad;    // [C][C]
  float* gam = A + kC * kC;     // [C] cumulative log decay
  float* bet = gam + kC;        // [C]
  float* egam = bet + kC;       // [C] e^gamma
  float* edec = egam + kC;      // [C] e^(gamma_last - gamma)
  float* inv = edec + kC;       // [2C] 1/|q|, 1/|k|

  const DeltaNetChunkItem it = items[blockIdx.x];
  const int j = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int kh = j / (a.v_heads / a.k_heads);
  const int64_t key_dim = static_cast<int64_t>(a.k_heads) * kD;
  const int64_t conv_dim = 2 * key_dim + static_cast<int64_t>(a.v_heads) * kD;
  float* out = scratch + (static_cast<int64_t>(blockIdx.x) * a.v_heads + j) * kDeltaNetScratchFloats;

  if (tid < kC) {
    float g = 0.0f, be = 0.0f;
    if (tid < it.len) {
      const Gates gt = gates(a, static_cast<int64_t>(it.row0) + tid, j);
      g = gt.g;
      be = gt.beta;
    }
    gam[tid] = g;
    bet[tid] = be;
  }
  for (int e = tid; e < kC * kD; e += 256) {
    const int t = e / kD, i = e % kD;
    float qv = 0.0f, kv = 0.0f;
    if (t < it.len) {
      const float* x = a.qkv + (static_cast<int64_t>(it.row0) + t) * conv_dim;
      qv = x[kh * kD + i];
      kv = x[key_dim + kh * kD + i];
    }
    Qs[t * kPad + i] = qv;
    Kn[t * kPad + i] = kv;
  }
  __syncthreads();
  if (tid == 0) {
    double acc = 0.0;
    for (int t = 0; t < kC; ++t) {
      acc += gam[t];
      gam[t] = static_cast<float>(acc);
    }
  }
  for (int t = warp; t < kC; t += 8) {
    float sq = 0.0f, sk = 0.0f;
    for (int i = lane; i < kD; i += 32) {
      sq += Qs[t * kPad + i] * Qs[t * kPad + i];
      sk += Kn[t * kPad + i] * Kn[t * kPad + i];
    }
    sq = warp_sum(sq);
    sk = warp_sum(sk);
    if (lane == 0) {
      inv[t] = 1.0f / sqrtf(sq + 1e-6f);
      inv[kC + t] = 1.0f / sqrtf(sk + 1e-6f);
    }
  }
  __syncthreads();
  if (tid < kC) {
    egam[tid] = expf(gam[tid]);
    edec[tid] = expf(gam[kC - 1] - gam[tid]);
  }
  for (int e = tid; e < kC * kD; e += 256) {
    const int t = e / kD, i = e % kD;
    Qs[t * kPad + i] = (Qs[t * kPad + i] * inv[t]) * q_scale();
    Kn[t * kPad + i] = Kn[t * kPad + i] * inv[kC + t];
  }
  __syncthreads();

  // A (strict lower) into shared; P (lower incl. diagonal) straight to scratch as Pᵀ.
  for (int k = 0; k < kC / 4; ++k) {
    {
      const int i = tid / kC + 4 * k, jj = tid % kC;
      float v = 0.0f;
      if (jj < i) {
        const float* ki = Kn + i * kPad;
        const float* kj = Kn + jj * kPad;
        float d = 0.0f;
#pragma unroll 8
        for (int r = 0; r < kD; ++r) d += ki[r] * kj[r];
        v = bet[i] * d * expf(gam[i] - gam[jj]);
      }
      A[i * kC + jj] = v;
    }
    {
      const int i = tid % kC, jj = tid / kC + 4 * k;
      float v = 0.0f;
      if (jj <= i) {
        const float* qi = Qs + i * kPad;
        const float* kj = Kn + jj * kPad;
        float d = 0.0f;
#pragma unroll 8
        for (int r = 0; r < kD; ++r) d += qi[r] * kj[r];
        v = d * expf(gam[i] - gam[jj]);
      }
      out[kOffPt + jj * kC + i] = v;
    }
  }
  // (e^gamma Q)ᵀ and e^(gamma_last - gamma) K.
  for (int e = tid; e < kC * kD; e += 256) {
    {
      const int r = e / kC, i = e % kC;
      out[kOffQgt + e] = egam[i] * Qs[i * kPad + r];
    }
    {
      const int i = e / kD, r = e % kD;
      out[kOffKd + e] = edec[i] * Kn[i * kPad + r];
    }
  }
  if (tid == 0) out[kOffDecay] = expf(gam[kC - 1]);
  __syncthreads();

  // Forward substitution: warps 0-3 solve W's columns (K from shared memory), warps 4-7 U's
  // (V straight from global memory, padded rows zero).
  const bool is_w = tid < kD;
  const int col = is_w ? tid : tid - kD;
  float w[kC];
  if (is_w) {
    delta::forward_substitute(A, [&](int i) { return bet[i] * egam[i] * Kn[i * kPad + col]; }, w);
  } else {
    const float* v = a.qkv + static_cast<int64_t>(it.row0) * conv_dim + 2 * key_dim + static_cast<int64_t>(j) * kD + col;
    delta::forward_substitute(A, [&](int i) { return i < it.len ? bet[i] * v[static_cast<int64_t>(i) * conv_dim] : 0.0f; }, w);
  }
  if (is_w) {
    float4* wt = reinterpret_cast<float4*>(out + kOffWt + static_cast<int64_t>(col) * kC);
#pragma unroll
    for (int i = 0; i < kC / 4; ++i) wt[i] = make_float4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
  } else {
#pragma unroll
    for (int i = 0; i < kC; ++i) out[kOffU + i * kD + col] = w[i];
  }
}

// ---- chunked: scan

constexpr int kScanSmemFloats = kD * 32 + kD * kC + kD * kC + kC * kD + kC * 32 + kC * kC + kC * 32;
constexpr int kScanSmem = kScanSmemFloats * 4;

// Global -> shared copies that do not wait: every thread issues all of its 16-byte copies,
// then the block waits once (a latency per chunk instead of one per copy round).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void copy4(float* dst, const float* src, int n_floats) {
#pragma unroll 8
  for (int i = threadIdx.x; i < n_floats / 4; i += 256) cp_async16(dst + 4 * i, src + 4 * i);
}

template <class State>
__global__ void __launch_bounds__(256) deltanet_scan_kernel(const DeltaNetArgs a, const DeltaNetChunkItem* items,
                                                       const DeltaNetChunkSeq* chunk_seqs, const float* scratch) {
  wait_for_previous_kernel();
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  float* Ss = sm;              // [D][32] state tile
  float* Wt = Ss + kD * 32;    // [D][C]
  float* Qgt = Wt + kD * kC;   // [D][C]
  float* Kd = Qgt + kD * kC;   // [C][D]
  float* Ut = Kd + kC * kD;    // [C][32]
  float* Pt = Ut + kC * 32;    // [C][C]
  float* Vn = Pt + kC * kC;    // [C][32]

  const int tile = blockIdx.x, j = blockIdx.y;
  const DeltaNetChunkSeq cs = chunk_seqs[blockIdx.z];
  const DevSeq sq = a.seqs[cs.seq];
  const int tid = threadIdx.x, c = tid & 31, rg = tid >> 5;
  State* const states = static_cast<State*>(a.state);
  State* S = states + ((static_cast<int64_t>(sq.state_slot) * a.n_layers + a.layer) * a.v_heads + j) * kD * kD;

  // Thread (c, rg) owns state rows 16rg .. 16rg+15 of column c; the shared tile mirrors them.
  float s16[16];
#pragma unroll
  for (int m = 0; m < 16; ++m) {
    s16[m] = state_load(S + static_cast<int64_t>(rg * 16 + m) * kD + tile * 32 + c);
    Ss[(rg * 16 + m) * 32 + c] = s16[m];
  }

  for (int item = cs.first_item; item < cs.first_item + cs.n_items; ++item) {
    const DeltaNetChunkItem it = items[item];
    if (it.snapshot_slot >= 0) {
      State* R = states + ((static_cast<int64_t>(it.snapshot_slot) * a.n_layers + a.layer) * a.v_heads + j) * kD * kD;
#pragma unroll
      for (int m = 0; m < 16; ++m) state_store(R + static_cast<int64_t>(rg * 16 + m) * kD + tile * 32 + c, s16[m]);
    }
    const float* src = scratch + (static_cast<int64_t>(item) * a.v_heads + j) * kDeltaNetScratchFloats;
    // Two groups: what V' and the inter-chunk output need first, then P and the state update's K.
    copy4(Wt, src + kOffWt, kD * kC);
    copy4(Qgt, src + kOffQgt, kD * kC);
    for (int e = tid; e < kC * 8; e += 256) {
      const int i = e / 8, q = e % 8;
      cp_async16(Ut + 4 * e, src + kOffU + i * kD + tile * 32 + 4 * q);
    }
    cp_async_commit();
    copy4(Kd, src + kOffKd, kC * kD);
    copy4(Pt, src + kOffPt, kC * kC);
    cp_async_commit();
    const float decay = src[kOffDecay];
    cp_async_wait<1>();
    __syncthreads();

    // V' and the inter-chunk part of O for rows 8rg .. 8rg+7 of column c.
    float vn[8], o[8];
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      vn[m] = Ut[(rg * 8 + m) * 32 + c];
      o[m] = 0.0f;
    }
#pragma unroll 4
    for (int r = 0; r < kD; ++r) {
      const float sv = Ss[r * 32 + c];
      const float4 w0 = reinterpret_cast<const float4*>(Wt + r * kC + rg * 8)[0];
      const float4 w1 = reinterpret_cast<const float4*>(Wt + r * kC + rg * 8)[1];
      const float4 q0 = reinterpret_cast<const float4*>(Qgt + r * kC + rg * 8)[0];
      const float4 q1 = reinterpret_cast<const float4*>(Qgt + r * kC + rg * 8)[1];
      vn[0] -= w0.x * sv; vn[1] -= w0.y * sv; vn[2] -= w0.z * sv; vn[3] -= w0.w * sv;
      vn[4] -= w1.x * sv; vn[5] -= w1.y * sv; vn[6] -= w1.z * sv; vn[7] -= w1.w * sv;
      o[0] += q0.x * sv; o[1] += q0.y * sv; o[2] += q0.z * sv; o[3] += q0.w * sv;
      o[4] += q1.x * sv; o[5] += q1.y * sv; o[6] += q1.z * sv; o[7] += q1.w * sv;
    }
#pragma unroll
    for (int m = 0; m < 8; ++m) Vn[(rg * 8 + m) * 32 + c] = vn[m];
    cp_async_wait<0>();
    __syncthreads();

    // Intra-chunk part of O: P V'.
#pragma unroll 4
    for (int jj = 0; jj < kC; ++jj) {
      const float v = Vn[jj * 32 + c];
      const float4 p0 = reinterpret_cast<const float4*>(Pt + jj * kC + rg * 8)[0];
      const float4 p1 = reinterpret_cast<const float4*>(Pt + jj * kC + rg * 8)[1];
      o[0] += p0.x * v; o[1] += p0.y * v; o[2] += p0.z * v; o[3] += p0.w * v;
      o[4] += p1.x * v; o[5] += p1.y * v; o[6] += p1.z * v; o[7] += p1.w * v;
    }
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const int i = rg * 8 + m;
      if (i < it.len)
        a.out[((static_cast<int64_t>(it.row0) + i) * a.v_heads + j) * kD + tile * 32 + c] = o[m];
    }

    // State: S = e^gamma_last S + Kdᵀ V'.
#pragma unroll
    for (int m = 0; m < 16; ++m) s16[m] *= decay;
#pragma unroll 2
    for (int i = 0; i < kC; ++i) {
      const float v = Vn[i * 32 + c];
      const float4* kd = reinterpret_cast<const float4*>(Kd + i * kD + rg * 16);
      const float4 k0 = kd[0], k1 = kd[1], k2 = kd[2], k3 = kd[3];
      s16[0] += k0.x * v; s16[1] += k0.y * v; s16[2] += k0.z * v; s16[3] += k0.w * v;
      s16[4] += k1.x * v; s16[5] += k1.y * v; s16[6] += k1.z * v; s16[7] += k1.w * v;
      s16[8] += k2.x * v; s16[9] += k2.y * v; s16[10] += k2.z * v; s16[11] += k2.w * v;
      s16[12] += k3.x * v; s16[13] += k3.y * v; s16[14] += k3.z * v; s16[15] += k3.w * v;
    }
#pragma unroll
    for (int m = 0; m < 16; ++m) Ss[(rg * 16 + m) * 32 + c] = s16[m];
    __syncthreads();  // the tiles are reloaded and the state re-read by the next chunk
  }
#pragma unroll
  for (int m = 0; m < 16; ++m) state_store(S + static_cast<int64_t>(rg * 16 + m) * kD + tile * 32 + c, s16[m]);
}

void check_dims(const DeltaNetArgs& a) {
  if (a.k_dim != kD || a.v_dim != kD)
    throw std::invalid_argument("cuda backend: gated_delta_rule: the CUDA kernels need dk = dv = 128");
  if (a.k_heads <= 0 || a.v_heads <= 0 || a.v_heads % a.k_heads != 0 || a.v_heads > 65535)
    throw std::invalid_argument("cuda backend: gated_delta_rule: bad head counts");
}

}  // namespace

void deltanet_recurrent(const DeltaNetArgs& a, const int32_t* seq_ids, int32_t n, Stream stream) {
  if (n == 0) return;
  check_dims(a);
  if (n > 65535) throw std::invalid_argument("cuda backend: gated_delta_rule: more than 65535 sequences");
  with_state_type(a, [&](auto* state) {
    using State = std::remove_pointer_t<decltype(state)>;
    const dim3 grid(kD / (32 * recurrent_columns<State>()), static_cast<unsigned>(a.v_heads), static_cast<unsigned>(n));
    launch_dependent("deltanet_recurrent_kernel", deltanet_recurrent_kernel<State>, grid, 128, 0, stream, a, seq_ids);
  });
}

void deltanet_chunked(const DeltaNetArgs& a, const DeltaNetChunkItem* items, int32_t n_items, const DeltaNetChunkSeq* chunk_seqs,
                      int32_t n_chunk_seqs, float* scratch, DeltaNetChunkMath math, int32_t n_sms, Stream stream) {
  if (n_items == 0) return;
  check_dims(a);
  if (n_chunk_seqs > 65535) throw std::invalid_argument("cuda backend: gated_delta_rule: more than 65535 sequences");
  if (math == DeltaNetChunkMath::tensor_cores)
    return delta::deltanet_chunked_tc(a, items, n_items, chunk_seqs, n_chunk_seqs, scratch, n_sms, stream);
  static const bool attributes_set = [] {
    check_cuda(cudaFuncSetAttribute(deltanet_prepare_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kPrepareSmem),
               "gated_delta_rule prepare kernel attribute");
    check_cuda(cudaFuncSetAttribute(deltanet_scan_kernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, kScanSmem),
               "gated_delta_rule scan kernel attribute");
    check_cuda(cudaFuncSetAttribute(deltanet_scan_kernel<__nv_bfloat16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    kScanSmem),
               "gated_delta_rule scan kernel (bf16 state) attribute");
    return true;
  }();
  (void)attributes_set;
  launch_dependent("deltanet_prepare_kernel", deltanet_prepare_kernel,
                   dim3(static_cast<unsigned>(n_items), static_cast<unsigned>(a.v_heads)), 256, kPrepareSmem, stream, a,
                   items, scratch);
  with_state_type(a, [&](auto* state) {
    using State = std::remove_pointer_t<decltype(state)>;
    launch_dependent("deltanet_scan_kernel", deltanet_scan_kernel<State>,
                     dim3(kD / 32, static_cast<unsigned>(a.v_heads), static_cast<unsigned>(n_chunk_seqs)), 256, kScanSmem,
                     stream, a, items, chunk_seqs, scratch);
  });
}

}  // namespace ds::cuda::ops
