// The CUDA backend's kernel launchers, one family per .cu file, called by CudaBackend
// (cuda_backend.cpp) after it has checked shapes and types.
//
// Plain C++ (no CUDA headers): pointers are raw device pointers, streams are `Stream`s, and
// activations are f32 or bf16 (DType) as each launcher says. Every launcher checks its own
// launch and throws std::runtime_error naming the kernel when CUDA reports an error.
// Everything that indexes rows, pools or state is 64-bit inside the kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/dtype.h"

struct CUstream_st;  // cudaStream_t is a CUstream_st*

namespace ds::cuda::ops {

// One sequence of a step, as the kernels read it from the uploaded plan.
struct DevSeq {
  int32_t first_row;
  int32_t n_tokens;
  int32_t n_cached;
  int32_t state_slot;
  // Row states (kernels/batch_plan.h): the state after row i also goes to slot
  // row_state_slots[row_state_begin + i] for i < n_row_states (token-by-token path only).
  int32_t row_state_begin;
  int32_t n_row_states;
  // Snapshot rows (batch_plan.h): snapshots[snapshot_begin + k] for k < n_snapshots, rows
  // ascending. The token-by-token kernels read these; on the chunked path the item that starts
  // after each row carries its slot instead (append_chunk_items).
  int32_t snapshot_begin = 0;
  int32_t n_snapshots = 0;
};

// A snapshot row: the state after row `row` of the sequence's chunk also goes to `slot`.
struct DevSnapshot {
  int32_t row;
  int32_t slot;
};

// One chunk (<= kDeltaNetChunk tokens) of a sequence handled by the chunked DeltaNet path; the
// index of the item in the list is its scratch index.
struct DeltaNetChunkItem {
  int32_t seq;
  int32_t row0;
  int32_t len;
  int32_t snapshot_slot = -1;  // the state the item starts from also goes to this slot
};

// A sequence on the chunked DeltaNet path: its items are [first_item, first_item + n_items).
struct DeltaNetChunkSeq {
  int32_t seq;
  int32_t first_item;
  int32_t n_items;
  int32_t pad;
};

inline constexpr int kDeltaNetChunk = 64;
// Sequences with at most this many new tokens take the token-by-token DeltaNet kernel; longer
// ones the chunked (WY) form, except those with row states (verify chunks), which always go
// token by token.
inline constexpr int kDeltaNetRecurrentMaxTokens = 8;

// The chunk items of sequence `seq` (rows [first_row, first_row + n_tokens)), appended to
// items: kDeltaNetChunk rows each from its first row, except that the items restart after
// each snapshot row (ascending), so that an item starts exactly at each snapshot's position
// and carries its slot (a short item in the middle of a sequence is as valid as a short last
// one).
inline DeltaNetChunkSeq append_chunk_items(std::vector<DeltaNetChunkItem>& items, int32_t seq, int32_t first_row,
                                           int32_t n_tokens, const DevSnapshot* snapshots = nullptr,
                                           int32_t n_snapshots = 0) {
  DeltaNetChunkSeq cs{seq, static_cast<int32_t>(items.size()), 0, 0};
  int32_t from = 0, slot = -1;
  for (int32_t k = 0; k <= n_snapshots; ++k) {
    const int32_t to = k < n_snapshots ? snapshots[k].row + 1 : n_tokens;
    for (int32_t t = from; t < to; t += kDeltaNetChunk, ++cs.n_items, slot = -1)
      items.push_back({seq, first_row + t, std::min(kDeltaNetChunk, to - t), slot});
    if (k < n_snapshots) slot = snapshots[k].slot;
    from = to;
  }
  return cs;
}
// Floats of chunk scratch per (chunk item, value head), enough for either chunked path: the
// fp32 one's Wt, Qgt, Kd, U (4 x 64 x 128 f32), Pt (64 x 64 f32) and the chunk's decay
// (padded to 16 bytes), which is more than the tensor-core one's (delta_rule_tc.cu).
inline constexpr int64_t kDeltaNetScratchFloats = 4 * 64 * 128 + 64 * 64 + 4;

// Where a launcher queues its kernels: the stream (a cudaStream_t, which this converts to), and
// whether they are chained behind the previous kernel as programmatic dependent launches
// (launch_dependent in backend_common.cuh). The backend passes CudaBackendOptions::
// chained_launches; a benchmark turns it off to measure what chaining saves.
struct Stream {
  void* handle = nullptr;
  bool chained = false;
  operator CUstream_st*() const { return static_cast<CUstream_st*>(handle); }
};

// ---- elementwise.cu
// out[r] = table[ids[r]] (table bf16 or f32 [V, H]) as f32.
void embedding(const void* table, DType table_type, const int32_t* ids, int64_t rows, int64_t hidden, float* out,
               Stream stream);
// out[i] = x[rows[i]] for width floats.
void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t width, float* out, Stream stream);
// out[m, i] = silu(gate_up[m, i]) * gate_up[m, I + i]; out f32 or bf16.
void swiglu(const float* gate_up, int64_t m, int64_t inter, void* out, DType out_type, Stream stream);
// The same from a bf16 gate_up [m, 2 * inter] to a bf16 out (inter % 8 == 0, 16-byte aligned).
void swiglu_bf16(const uint16_t* gate_up, int64_t m, int64_t inter, uint16_t* out, Stream stream);
// qg [rows*heads, 2D] -> q, gate [rows*heads, D].
void split_query_gate(const float* qg, int64_t rows_heads, int64_t d, float* q, float* gate, Stream stream);
// Column ranges of x [m, n] into parts: part i gets columns [first[i], first[i + 1]) as a
// contiguous [m, first[i + 1] - first[i]] array; first[0] = 0, first[count] = n.
inline constexpr int kMaxSplitParts = 4;
struct SplitParts {
  float* dst[kMaxSplitParts];
  int64_t first[kMaxSplitParts + 1];
  int count;
};
void split_columns(const float* x, int64_t m, int64_t n, const SplitParts& parts, Stream stream);
// x *= sigmoid(gate), x f32 or bf16, gate f32.
void sigmoid_gate(void* x, DType x_type, const float* gate, int64_t n, Stream stream);
// f32 -> bf16 (round to nearest even).
void to_bf16(const float* x, uint16_t* out, int64_t n, Stream stream);
// bf16 -> f32.
void bf16_to_f32(const uint16_t* x, float* out, int64_t n, Stream stream);

// ---- gemv.cu
// Decode GEMMs (up to kGemvMaxRows rows): out [M, N] (+)= x [M, K] · w [N, K]ᵀ, bf16 operands,
// fp32 accumulation, f32 out. K must be a multiple of 8. One row (batch-1 decode), where it
// measured on par with or ahead of cuBLAS; wider batches stay on cuBLAS.
inline constexpr int64_t kGemvMaxRows = 1;
bool gemv_supported(int64_t M, int64_t K);
void gemv_bf16(const uint16_t* w, const uint16_t* x, int64_t M, int64_t N, int64_t K, float* out, bool accumulate,
               Stream stream);
// ---- skinny_gemm.cu
// Decode GEMMs of 2 to kSkinnyMaxRows rows on tensor cores, the weights streamed once:
// out [M, N] (+)= x [M, K] · w [N, K]ᵀ, bf16 operands, fp32 accumulation, f32 out; K a
// multiple of 64. Measured ahead of cuBLAS at 2 and 8 rows, behind at 16 (docs/bench-log).
inline constexpr int64_t kSkinnyMaxRows = 8;
bool skinny_gemm_supported(int64_t M, int64_t K);
void skinny_gemm_bf16(const uint16_t* w, const uint16_t* x, int64_t M, int64_t N, int64_t K, float* out,
                      bool accumulate, Stream stream);

// The MLP's gate/up projection and SwiGLU for one row: act[i] = silu(w[i] · x) * (w[I + i] · x)
// with w the stacked [gate; up] weight [2I, K]; act f32 or bf16.
void gemv_swiglu_bf16(const uint16_t* w, const uint16_t* x, int64_t inter, int64_t K, void* act, DType act_type,
                      Stream stream);

// ---- fp8_gemm.cu
// An FP8 weight [N, K] on the device: codes (one byte each, row-major) and f32 scales, the
// scale of (n, k) at scales[(n >> row_shift) * scale_cols + k / 128] (kernels::Fp8Scales).
struct Fp8Weight {
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;
  int64_t scale_cols = 0;
  int row_shift = 0;
};
// The decode GEMMs over FP8 weights, dequantised in registers: out [M, N] (+)= x [M, K] · wᵀ,
// x bf16, f32 out. The tensor-core kernel (skinny_gemm_fp8) takes 1 to kSkinnyFp8MaxRows rows
// (the x rows in up to 8 column tiles of mma.m16n8k16, so the weights are streamed once), K a
// multiple of 64; the warp-per-row GEMV (gemv_fp8, as gemv.cu) one row with K a multiple of 16.
inline constexpr int64_t kSkinnyFp8MaxRows = 64;
bool gemv_fp8_supported(int64_t M, int64_t K);
bool skinny_gemm_fp8_supported(int64_t M, int64_t K);
void gemv_fp8(const Fp8Weight& w, const uint16_t* x, int64_t N, int64_t K, float* out, bool accumulate, Stream stream);
void skinny_gemm_fp8(const Fp8Weight& w, const uint16_t* x, int64_t M, int64_t N, int64_t K, float* out,
                     bool accumulate, Stream stream);
// gemv_swiglu_bf16 over an FP8 [gate; up] weight: the warp-per-row GEMV (K a multiple of 16)
// or the tensor-core kernel (skinny_swiglu_fp8; K as skinny_gemm_fp8_supported(1, K)).
void gemv_swiglu_fp8(const Fp8Weight& w, const uint16_t* x, int64_t inter, int64_t K, void* act, DType act_type,
                     Stream stream);
void skinny_swiglu_fp8(const Fp8Weight& w, const uint16_t* x, int64_t inter, int64_t K, void* act, DType act_type,
                       Stream stream);
// out [N, K] bf16 = code * scale (rounded to nearest even): what cuBLAS reads for larger steps.
void dequantize_fp8_bf16(const Fp8Weight& w, int64_t N, int64_t K, uint16_t* out, Stream stream);
// x bf16 [M, K] (K a multiple of 128) as e4m3 codes [M, K] (row-major, rounded to nearest,
// saturating) and one f32 scale per row and 128 columns, amax / 448 (1 where the group is all
// zero), at scales[m * scale_row_stride + (k / 128) * scale_col_stride]: the activations of the
// block-scaled FP8 GEMM (fp8_block_gemm.h).
void quantize_rows_fp8(const uint16_t* x, int64_t M, int64_t K, uint8_t* codes, float* scales, int64_t scale_row_stride,
                       int64_t scale_col_stride, Stream stream);

// ---- int4_gemm.cu
// A 4-bit weight [N, K] on the device (kernels::Int4Groups): codes half a byte each, in groups
// of kernels::kInt4RowGroup rows that hold their chunks of 128 columns in the kernels' order
// (repack_int4), f32 scales and u8 zeros [N, K / group_size], and the input column of each
// stored column (perm [K]) or null for the identity.
struct Int4Weight {
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;
  const uint8_t* zeros = nullptr;
  int64_t group_size = 0;
  const int32_t* perm = nullptr;
};
// What the device layout holds: N a multiple of kernels::kInt4RowGroup, K a multiple of 128
// and group sizes of 32, 64 or a multiple of 128 that divide K (every weight of a released
// checkpoint); the backend keeps other int4 weights as bf16.
bool int4_layout_supported(int64_t N, int64_t K, int64_t group_size);
// The host form (column k at nibble k % 2 of byte k / 2 of its row, N * K / 2 bytes on the
// device) to the kernels' layout in `codes` (as many bytes, another buffer). Queued on stream
// (not as a dependent launch: it runs at upload).
void repack_int4(const uint8_t* host_form, uint8_t* codes, int64_t N, int64_t K, Stream stream);
// The decode GEMMs over 4-bit weights, decoded in registers: out [M, N] (+)= x [M, K] · wᵀ, x
// bf16, f32 out, 1 to kSkinnyInt4MaxRows rows (the x rows in up to 8 column tiles of
// mma.m16n8k16, so the weights are streamed once).
inline constexpr int64_t kSkinnyInt4MaxRows = 64;
bool skinny_gemm_int4_supported(int64_t M);
void skinny_gemm_int4(const Int4Weight& w, const uint16_t* x, int64_t M, int64_t N, int64_t K, float* out,
                      bool accumulate, Stream stream);
// gemv_swiglu_bf16 over a 4-bit [gate; up] weight on that kernel.
void skinny_swiglu_int4(const Int4Weight& w, const uint16_t* x, int64_t inter, int64_t K, void* act, DType act_type,
                        Stream stream);
// out [N, K] bf16 in input column order = scale * (code - zero) (rounded to nearest even):
// what cuBLAS reads for larger steps.
void dequantize_int4_bf16(const Int4Weight& w, int64_t N, int64_t K, uint16_t* out, Stream stream);

// ---- norms.cu
// Zero-centred RMSNorm over rows of d: out = x * rsqrt(mean(x²) + eps) * (1 + w). x and out f32
// or bf16 (may alias when of one type); w f32 [d].
void rms_norm(const void* x, DType x_type, const float* w, int64_t rows, int64_t d, float eps, void* out,
              DType out_type, Stream stream);
// Gated RMSNorm: out = (w * (x * rsqrt(mean(x²) + eps))) * silu(z), x and z f32, out f32 or bf16.
void gated_rms_norm(const float* x, const float* z, const float* w, int64_t rows, int64_t d, float eps, void* out,
                    DType out_type, Stream stream);

// ---- rope.cu
// Where RoPE reads a row's position: positions[row]; with M-RoPE (mrope not null: the plan's
// (t, h, w) per row, kernels/batch_plan.h) frequency i of row r reads mrope[3 r + axis[i]].
struct RopePositions {
  const int32_t* positions = nullptr;
  const int32_t* mrope = nullptr;
  const uint8_t* axis = nullptr;  // [rotary / 2]: 0 t, 1 h, 2 w
};
// In-place partial rotate-half RoPE on x [rows, heads, d] at each row's position; inv_freq [rotary/2];
// the rotated pairs scaled by `scale` (RopeParams::attention_scaling).
void rope(float* x, const RopePositions& positions, int64_t rows, int64_t heads, int64_t d, int64_t rotary,
          const float* inv_freq, float scale, Stream stream);
// The attention block's q/k preparation in one launch: q = rope(rms_norm(query half of qg, q_norm)),
// gate = gate half of qg, k = rope(rms_norm(k, k_norm)) in place. qg [rows, nq, 2d], q and gate
// [rows, nq, d], k [rows, nkv, d], all f32; d a multiple of 32, at most 1024.
bool qk_norm_rope_supported(int64_t d);
void qk_norm_rope(const float* qg, float* q, float* gate, float* k, const float* q_norm, const float* k_norm,
                  const RopePositions& positions, int64_t rows, int64_t nq, int64_t nkv, int64_t d, float eps,
                  int64_t rotary, const float* inv_freq, float scale, Stream stream);

// ---- vision_ops.cu: the vision encoder's small kernels (kernels/backend.h)
// out = LayerNorm(x) * w + b per row of d (x f32; out f32 or bf16).
void layer_norm(const float* x, const float* w, const float* b, int64_t rows, int64_t d, float eps, void* out,
                DType out_type, Stream stream);
// x [rows, d] += b [d].
void add_bias(float* x, const float* b, int64_t rows, int64_t d, Stream stream);
// out = GELU(x), the tanh approximation or exact (erf); out f32 or bf16.
void gelu(const float* x, const float* bias, int64_t rows, int64_t d, bool tanh_approx, void* out, DType out_type,
          Stream stream);
// x[r] += sum_t weights[r, t] * table[idx[r, t]] (table f32 or bf16 [*, d]).
void add_position_embedding(const void* table, DType table_type, const int32_t* idx, const float* weights, int64_t rows,
                            int64_t taps, int64_t d, float* x, Stream stream);
// In-place rotate-half over whole heads of x [rows, heads, 2 half] with per-row cos / sin [rows, half].
void rotary_embedding(float* x, const float* cos, const float* sin, int64_t rows, int64_t heads, int64_t half,
                      Stream stream);
// ---- segment_attention.cu, segment_attention_tc.cu
// Non-causal attention within segments [offsets[s], offsets[s + 1]) (device, n_segments + 1
// entries). d up to 128.
// segment_attention: the f32 kernel (the f32-weight reference mode) for q, k, v [rows, heads, d]
// f32; out f32 or bf16.
bool segment_attention_supported(int64_t d);
void segment_attention(const float* q, const float* k, const float* v, const int64_t* offsets, int64_t n_segments,
                       int64_t rows, int64_t heads, int64_t d, float scale, void* out, DType out_type, Stream stream);
// segment_attention_tc: the tensor-core kernel (bf16 Q, K, V and P, f32 accumulation) for a
// bf16 out [rows, heads, d]. Its inputs are f32 column blocks [rows, heads * d] with row stride
// ld (separate tensors, or the thirds of the vision block's fused QKV projection), to which it
// first adds `bias` [3, heads * d] (if not null) and applies the rotary embedding of
// rotary_embedding (cos, sin [rows, d / 2], if not null) to q and k, in its pass that packs
// them to bf16 into `scratch` (segment_attention_tc_scratch_bytes).
struct SegmentOperands {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t ld = 0;
  const float* bias = nullptr;
  const float* cos = nullptr;
  const float* sin = nullptr;
};
int64_t segment_attention_tc_scratch_bytes(int64_t rows, int64_t heads, int64_t d);
void segment_attention_tc(const SegmentOperands& in, const int64_t* offsets, int64_t n_segments, int64_t rows,
                          int64_t heads, int64_t d, float scale, void* scratch, void* out, Stream stream);
// ---- conv1d.cu
// Depthwise causal conv1d + SiLU per sequence from its conv state [slots, layers, C, kc-1],
// leaving the last kc-1 inputs there. x, out [rows, C] f32, w [C, kc] f32. For the sequences
// seq_ids[0, n) (all n when seq_ids is null), token by token, also leaving the window after
// row i in the row-state slots (row_state_slots: the plan's concatenated list; may be null
// when no sequence has row states) and after each snapshot row in its slot (snapshots: the
// plan's list; may be null when none):
void causal_conv1d(const float* x, const float* w, float* conv_state, int64_t n_layers, int64_t layer,
                   const DevSeq* seqs, const int32_t* seq_ids, int32_t n_seqs, const int32_t* row_state_slots,
                   const DevSnapshot* snapshots, int64_t channels, int32_t kc, float* out, Stream stream);
// For the sequences of a chunk list (more than kc-1 new rows each), all chunks in parallel:
void causal_conv1d_chunks(const float* x, const float* w, float* conv_state, int64_t n_layers, int64_t layer,
                          const DevSeq* seqs, const DeltaNetChunkItem* items, int32_t n_items, const DeltaNetChunkSeq* chunk_seqs,
                          int32_t n_chunk_seqs, int64_t channels, int32_t kc, float* out, Stream stream);

// ---- delta_rule.cu
struct DeltaNetArgs {
  const float* qkv;      // [rows, conv_dim]
  const float* a;        // [rows, Hv]
  const float* b;        // [rows, Hv]
  const float* a_log;    // [Hv]
  const float* dt_bias;  // [Hv]
  void* state;           // [slots, layers, Hv, dk, dv] of state_type
  DType state_type;      // f32 or bf16 (CudaBackendOptions::recurrent_state_dtype)
  float* out;            // [rows, Hv, dv]
  int64_t n_layers;
  int64_t layer;
  int32_t k_heads, v_heads, k_dim, v_dim;
  const DevSeq* seqs;
  const int32_t* row_state_slots;  // the plan's row-state slots (DevSeq::row_state_begin)
  const DevSnapshot* snapshots;    // the plan's snapshot rows (DevSeq::snapshot_begin)
};
// Token by token for the sequences seq_ids[0, n) (dk = dv = 128), S after row i also stored
// in the sequence's row-state slot i.
void deltanet_recurrent(const DeltaNetArgs& a, const int32_t* seq_ids, int32_t n, Stream stream);
// How the chunked form does its matrix products: bf16 operands on the tensor cores with fp32
// accumulation (delta_rule_tc.cu; what production runs, within bf16 rounding of the
// recurrence), or fp32 on the CUDA cores (delta_rule.cu; the f32-weight reference mode, whose
// prefilled state equals the token-by-token one to fp32 rounding).
enum class DeltaNetChunkMath { tensor_cores, fp32 };
// The chunked (WY) form for the sequences of `chunk_seqs`, through `scratch`
// (n_items * Hv * kDeltaNetScratchFloats floats); n_sms (the device's SMs) picks the
// tensor-core scan's form.
void deltanet_chunked(const DeltaNetArgs& a, const DeltaNetChunkItem* items, int32_t n_items, const DeltaNetChunkSeq* chunk_seqs,
                      int32_t n_chunk_seqs, float* scratch, DeltaNetChunkMath math, int32_t n_sms, Stream stream);

// ---- attention_prefill.cu
// One prefill chunk of a sequence attending to its paged K/V (attention_prefill.cu says how).
struct PrefillAttention {
  const float* q;               // [n_tokens, n_q_heads, head_dim]: the chunk's queries
  void* out;                    // [n_tokens, n_q_heads, head_dim], f32 or bf16
  DType out_type;
  const void* k_pool;           // [blocks, block_size, n_kv_heads] rows of k_row_bytes
  const void* v_pool;
  DType k_type, v_type;         // bf16, f16, f32, q8_0 or q4_0
  int64_t k_row_bytes, v_row_bytes;
  const int32_t* block_table;   // the sequence's block ids, covering n_cached + n_tokens
  int32_t block_size;
  int64_t n_cached;             // positions before the chunk (its K/V already in the pool)
  int64_t n_tokens;             // the chunk, whose K/V kv_write has stored
  int32_t n_q_heads, n_kv_heads, head_dim;  // head_dim 128 or 256
  float scale;
};
// How many parts to split each CTA's key range into, so that a short chunk after a long
// prefix still fills the n_sms SMs.
int32_t prefill_attention_splits(const PrefillAttention& a, int32_t n_sms);
// Floats of scratch a split launch needs (0 for one split).
size_t prefill_attention_scratch_floats(const PrefillAttention& a, int32_t n_splits);
// Causal attention of the chunk: token t sees positions [0, n_cached + t].
void prefill_attention(const PrefillAttention& a, int32_t n_splits, float* scratch, Stream stream);

// ---- lora.cu
// LoRA's gathered shrink and expand (kernels/backend.h) over tiles of rows that share a slot
// (CudaBatchPlan builds them): tile t covers rows tile_rows[first .. first + count) of slot
// `slot`; count 0 pads a recorded step's fixed grid. Rows in no tile are untouched.
constexpr int kLoraTileRows = 16;
struct LoraTile {
  int32_t first;
  int32_t count;
  int32_t slot;
  int32_t pad;
};
// The expand's tile of rank vectors lives in shared memory: kLoraTileRows * R + 16 floats at most
// this many bytes (R <= 3,615): sm_90's 227 KiB a block, less 1 KiB for the kernel's static
// shared memory.
constexpr size_t kLoraExpandMaxShared = 226 * 1024;
// shrink: tmp[r, i] = sum_k a[slot, i, k] * x[r, k]; x f32 or bf16 [rows, K], a [slots, R, K],
// tmp [rows, R].
void lora_shrink(const void* x, DType x_type, int64_t rows, int64_t K, const float* a, int64_t R, const LoraTile* tiles,
                 int32_t n_tiles, const int32_t* tile_rows, float* tmp, Stream stream);
// expand, for each target t of `targets` (each what one Backend::lora_expand names):
// t.out[r * t.ld + j] += sum_i t.b[slot, j, i] * t.tmp[r * ld_tmp + i], i < t.R, j < t.N; b
// [slots, N, R]; t.tmp points at the target's rank range of a shrink output whose rows are
// ld_tmp >= R floats apart, t.out at its first column. One launch for all of them: a group of
// projections that share a shrink pays one expand's latency (their writes must not meet, which
// the Backend contract checks). Each output element's sum is the same whatever the targets
// beside it, so a group gives what its targets launched one by one give, bit for bit.
inline constexpr int kLoraExpandMaxTargets = 4;
struct LoraExpandTargets {
  struct Target {
    const float* tmp;
    const float* b;
    float* out;
    int64_t R, N, ld;
  };
  Target t[kLoraExpandMaxTargets];
  int count = 0;
  int64_t ld_tmp = 0;
};
void lora_expand(const LoraExpandTargets& targets, const LoraTile* tiles, int32_t n_tiles, const int32_t* tile_rows,
                 Stream stream);

}  // namespace ds::cuda::ops
