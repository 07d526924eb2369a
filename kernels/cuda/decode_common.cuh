// What the decode kernels share: the argument block, the work-item decoding, the bounds
// guard and the final write of a (chunk, head) result, either straight to the output (a
// sequence's only chunk) or as an fp32 partial plus its base-2 log-sum-exp for the merge.
//
// Internal to kernels/cuda; the public interface is paged_attention.h.
#pragma once

#include <cstdint>

#include "kernels/cuda/kv_elements.cuh"
#include "kernels/cuda/paged_attention.h"
#include "kernels/hip/gpu_runtime.h"

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
  const int32_t* seq_rows;
  const DecodeWorkItem* items;
  int32_t* guard;
  uint64_t* trace;  // null, or kTraceWords per thread block (DecodeOptions::trace)
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
  bool tma;        // tensor-core kernel: K/V tiles by bulk tensor copies (TcMaps; sm_90)
};

// Tensor maps of the K and V pools (tma_pool_map.h; 128 bytes each, as CUtensorMap) for the
// tensor-core kernel's bulk tile copies; unused unless DecodeArgs::tma.
struct alignas(64) TcMaps {
  uint64_t k[16];
  uint64_t v[16];
};

// Phase stamps of one thread block (DecodeOptions::trace), clock64 unless named: [0]
// %globaltimer at start (ns), [1] SM id, [2] start, [3] the first tile is in shared memory,
// [4] the last tile is consumed, [5] the result is written, [6] %globaltimer at the end,
// [7] tokens of the chunk, [8] the work item and length have arrived, [9] the first block ids
// have arrived, [10] q is in registers, [11] the warps' sums are reduced, [12] the first
// stages are issued, [13] the second tile is in shared memory, [14] q is in shared memory.
inline constexpr int kTraceWords = 16;
__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t = 0;
#if !DS_GPU_HIP
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
#endif
  return t;
}
__device__ __forceinline__ uint64_t smid() {
  uint32_t s = 0;
#if !DS_GPU_HIP
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
#endif
  return s;
}
// clock64 once `dep` is available (the register dependency makes the stamp wait for its load).
__device__ __forceinline__ uint64_t clock_after(uint32_t dep) {
  uint64_t t = 0;
#if !DS_GPU_HIP
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) : "r"(dep));
#else
  (void)dep;
  t = clock64();
#endif
  return t;
}
__device__ __forceinline__ void trace_end(uint64_t* trace, int ntok) {
  trace[5] = clock64();
  trace[6] = global_timer_ns();
  trace[7] = static_cast<uint64_t>(ntok);
}

// Token range [t0, t1) of a work item; t1 <= t0 means an empty chunk.
struct ItemRange {
  int32_t seq, row, t0, t1, flags, partial;
};

__device__ __forceinline__ ItemRange item_range(const DecodeArgs& a, int item_index) {
  const DecodeWorkItem it = a.items[item_index];
  ItemRange r;
  r.seq = it.seq;
  r.row = a.seq_rows ? a.seq_rows[it.seq] : it.seq;
  const int32_t len = a.seq_lens[r.row];
  r.t0 = it.token_begin;
  r.t1 = (it.flags & kItemLast) ? len : min(len, it.token_begin + a.chunk_tokens);
  r.flags = it.flags;
  r.partial = it.partial;
  return r;
}

__device__ __forceinline__ int32_t page_of(const DecodeArgs& a, int32_t tok) {
  return a.block_shift >= 0 ? (tok >> a.block_shift) : tok / a.block_size;
}

// Token row (blk * block_size + offset in the block) of token tok, or -1 when the block id is
// refused by the bounds guard.
__device__ __forceinline__ int64_t kv_token_row(const DecodeArgs& a, int32_t blk, int32_t tok, int32_t page) {
  if (a.bounds_check && (blk < 0 || blk >= a.num_blocks)) {
    if (atomicCAS(&a.guard[0], 0, 1) == 0) a.guard[1] = blk;
    return -1;
  }
  return static_cast<int64_t>(blk) * a.block_size + (tok - static_cast<int64_t>(page) * a.block_size);
}
// Row index (in rows of head_dim) of token tok of KV head kvh, or -1 when refused.
__device__ __forceinline__ int64_t kv_row(const DecodeArgs& a, int32_t blk, int32_t tok, int32_t page, int kvh) {
  const int64_t t = kv_token_row(a, blk, tok, page);
  return t < 0 ? -1 : t * a.n_kv_heads + kvh;
}

__device__ __forceinline__ float load_q(const DecodeArgs& a, int64_t index) {
  return a.q_f32 ? static_cast<const float*>(a.q)[index]
                 : bf16_bits_to_f32(static_cast<const uint16_t*>(a.q)[index]);
}

// Stores the normalised result of one (chunk, query head, d); lse is log2(sum 2^logit).
__device__ __forceinline__ void write_result(const DecodeArgs& a, const ItemRange& r, int qhead, int d, float val,
                                             float lse) {
  if (r.flags & kItemOnly) {
    const int64_t o = (static_cast<int64_t>(r.seq) * a.n_q_heads + qhead) * a.head_dim + d;
    if (a.out_f32)
      static_cast<float*>(a.out)[o] = val;
    else
      static_cast<uint16_t*>(a.out)[o] = f32_to_bf16_bits(val);
  } else {
    const int64_t p = static_cast<int64_t>(r.partial) * a.n_q_heads + qhead;
    a.part_o[p * a.head_dim + d] = val;
    if (d == 0) a.part_lse[p] = lse;
  }
}

// The same for four consecutive elements d..d+3 (d a multiple of 4): one 16-byte store (8 for
// bf16 output).
__device__ __forceinline__ void write_result4(const DecodeArgs& a, const ItemRange& r, int qhead, int d, float4 v,
                                              float lse) {
  if (r.flags & kItemOnly) {
    const int64_t o = (static_cast<int64_t>(r.seq) * a.n_q_heads + qhead) * a.head_dim + d;
    if (a.out_f32) {
      *reinterpret_cast<float4*>(static_cast<float*>(a.out) + o) = v;
    } else {
      const uint32_t lo = f32_to_bf16_bits(v.x) | (static_cast<uint32_t>(f32_to_bf16_bits(v.y)) << 16);
      const uint32_t hi = f32_to_bf16_bits(v.z) | (static_cast<uint32_t>(f32_to_bf16_bits(v.w)) << 16);
      *reinterpret_cast<uint2*>(static_cast<uint16_t*>(a.out) + o) = make_uint2(lo, hi);
    }
  } else {
    const int64_t p = static_cast<int64_t>(r.partial) * a.n_q_heads + qhead;
    *reinterpret_cast<float4*>(a.part_o + p * a.head_dim + d) = v;
    if (d == 0) a.part_lse[p] = lse;
  }
}

// Launchers, one per kernel family (defined in the .cu files).
void launch_portable(const DecodeArgs& a, DType k_type, DType v_type, dim3 grid, gpuStream_t stream);
int64_t portable_smem_bytes(int group, int head_dim);
const void* portable_symbol(DType k_type, DType v_type);

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

// One instantiation of the tensor-core kernel: its symbol (for attributes and occupancy)
// and its launcher. tc_entry_for<K> is defined in decode_tc_<K>.cu, one file per K type so
// the instantiations compile in parallel.
struct TcEntry {
  using Launch = void (*)(const DecodeArgs&, const TcMaps&, dim3, int64_t, gpuStream_t, bool chained);
  const void* symbol = nullptr;
  Launch launch = nullptr;
  // Token-row tiles (decode_tc.cuh), where the types and head_dim allow them; else null.
  const void* rows_symbol = nullptr;
  Launch launch_rows = nullptr;
};
template <DType KT>
TcEntry tc_entry_for(DType v_type, int head_dim);
TcEntry tc_entry(DType k_type, DType v_type, int head_dim);
inline constexpr int kTcWarps = 4;
inline constexpr int kTcHeads = 8;

}  // namespace ds::cuda::detail
