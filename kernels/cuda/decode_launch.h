// What the host side of paged decode attention (paged_attention.cpp, decode_chooser.cpp)
// and the decode kernels (decode_tc.cuh, decode_portable.cu, decode_merge.cu) agree on: the
// argument block, the kernels' entry points and their launchers.
//
// Internal to kernels/cuda; plain C++ (no CUDA headers), so the host files are ordinary C++.
// Streams are `void*` (a cudaStream_t or hipStream_t).
#pragma once

#include <cstdint>

#include "kernels/cuda/paged_attention.h"
#include "kernels/dtype.h"

namespace ds::cuda::detail {

inline constexpr float kLog2e = 1.4426950408889634f;

struct DecodeArgs {
  const uint8_t* k_pool;
  const uint8_t* v_pool;
  const void* q;
  void* out;
  float* part_o;    // [partials, n_q_heads, head_dim]
  float* part_lse;  // [partials, n_q_heads], base 2
  const int32_t* table;
  const int32_t* seq_lens;
  const DecodeWorkItem* items;
  int32_t* guard;
  uint64_t* trace;  // the traced instantiations only (decode_trace.h): kTraceWords per thread block
  int64_t num_blocks;
  int64_t table_stride;
  int32_t block_size;
  int32_t block_shift;  // log2(block_size) when a power of two, else -1
  int32_t n_kv_heads;
  int32_t n_q_heads;
  int32_t group;        // n_q_heads / n_kv_heads
  int32_t head_chunks;  // thread blocks per KV head
  int32_t heads_per_cta;
  int32_t chunk_tokens;
  int32_t head_dim;
  int32_t stages;
  float q_scale;  // softmax scale * log2(e): logits are kept in base 2
  bool q_f32;
  bool out_f32;
  bool bounds_check;
  bool q_align16;  // q is 16-byte aligned (else 4-byte)
  bool tma;        // per-head tensor-core kernel: K/V tiles by bulk tensor copies (TcMaps; sm_90)
};

// Tensor maps of the K and V pools (tma_pool_map.h; 128 bytes each, as CUtensorMap) for the
// tensor-core kernel's bulk tile copies; unused unless DecodeArgs::tma or token-row tiles.
struct alignas(64) TcMaps {
  uint64_t k[16];
  uint64_t v[16];
};

// Phase stamps of one thread block (traced instantiations only), clock64 unless named: [0]
// %globaltimer at start (ns), [1] SM id, [2] start, [3] the first tile is in shared memory,
// [4] the last tile is consumed, [5] the result is written, [6] %globaltimer at the end,
// [7] tokens of the chunk, [8] the work item and length have arrived, [9] the first block ids
// have arrived, [10] q is in registers, [11] the warps' sums are reduced, [12] the first
// stages are issued, [13] the second tile is in shared memory, [14] q is in shared memory.
inline constexpr int kTraceWords = 16;

// ---- the portable kernel (decode_portable.cu)
void launch_portable(const DecodeArgs& a, DType k_type, DType v_type, uint32_t grid_x, uint32_t grid_y, void* stream);
int64_t portable_smem_bytes(int group, int head_dim);
const void* portable_symbol(DType k_type, DType v_type);

// ---- the tensor-core kernel (decode_tc.cuh): 4 warps, up to 8 query heads per block
inline constexpr int kTcWarps = 4;
inline constexpr int kTcHeads = 8;

struct TcConfig {
  int stages = 0;
  int64_t smem_bytes = 0;
  bool supported = false;
};
// Stages and shared memory for an instantiation using `regs` registers per thread, on a
// device with smem_per_sm bytes per SM (smem_optin per block): the most resident blocks (up to
// max_blocks_per_sm, at most three) that registers allow and that still get three stages each.
// token_rows: the layout of token-row tiles (decode_tc.cuh) instead of per-warp stages.
TcConfig tc_config(DType k_type, DType v_type, int head_dim, int regs, int64_t static_smem, int64_t smem_optin,
                   int64_t smem_per_sm, int max_blocks_per_sm, bool token_rows = false);

// One (K type, V type, head_dim) of the tensor-core kernel: its two kernels' symbols (for
// attributes and occupancy) and launchers. tc_entry_for<K> is defined in decode_tc_<K>.cu,
// one file per K type so the instantiations compile in parallel.
struct TcEntry {
  using Launch = void (*)(const DecodeArgs&, const TcMaps&, uint32_t grid_x, uint32_t grid_y, int64_t smem,
                          void* stream, bool chained);
  const void* symbol = nullptr;  // a block per (KV head, chunk of query heads)
  Launch launch = nullptr;
  // Token-row tiles, where the types and head_dim allow them; else null.
  const void* token_rows_symbol = nullptr;
  Launch launch_token_rows = nullptr;
};
template <DType KT>
TcEntry tc_entry_for(DType v_type, int head_dim);
TcEntry tc_entry(DType k_type, DType v_type, int head_dim);

// ---- the merge of split chunks (decode_merge.cu)
struct MergeArgs {
  const float* part_o;
  const float* part_lse;
  const int32_t* seq_item_begin;
  void* out;
  bool out_f32;
  int32_t n_seqs;
  int32_t n_q_heads;
  int32_t head_dim;
  int32_t sm_count;
};
inline constexpr int kMergeMaxHeadDim = 1024;
// chained: scheduled while the decode kernel drains (programmatic dependent launch).
void launch_merge(const MergeArgs& m, void* stream, bool chained);

// ---- host helpers (paged_attention.cpp)
// Raises a kernel's dynamic shared-memory limit once per (device, kernel, size).
void ensure_smem_limit(const void* symbol, int64_t bytes);
// Throws std::invalid_argument("paged attention: ...") for pools the kernels cannot read.
void validate_pools(const KvPoolView& pools, int32_t n_q_heads);
// paged_attention_decode with the tensor-core kernels of `tc` (tc_entry's, or the traced ones
// of decode_trace.h with their stamp buffer `trace`).
void decode_with(const KvPoolView& pools, const DecodeQuery& q, DecodeWorkspace& ws, const DecodeOptions& opts,
                 const TcEntry& tc, uint64_t* trace, void* stream);

}  // namespace ds::cuda::detail
