// Device code the decode kernels share: the work-item decoding, the bounds guard, the final
// write of a (chunk, head) result, either straight to the output (a sequence's only chunk) or
// as an fp32 partial plus its base-2 log-sum-exp for the merge, and the phase stamps of the
// traced instantiations.
//
// Internal to kernels/cuda; the public interface is paged_attention.h, the host/kernel
// contract decode_launch.h.
#pragma once

#include <cstdint>

#include "kernels/common/gpu_runtime.h"
#include "kernels/cuda/decode_launch.h"
#include "kernels/cuda/kv_elements.cuh"

namespace ds::cuda::detail {

// Phase stamps (decode_launch.h, kTraceWords) of the traced instantiations.
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
  int32_t seq, t0, t1, flags, partial;  // seq: batch entry and block-table row
};

__device__ __forceinline__ ItemRange item_range(const DecodeArgs& a, int item_index) {
  const DecodeWorkItem it = a.items[item_index];
  ItemRange r;
  r.seq = it.seq;
  const int32_t len = a.seq_lens[r.seq];
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

}  // namespace ds::cuda::detail
