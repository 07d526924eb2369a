// What the paged prefill attention kernel (attention_prefill.cuh) is sized by and where it
// keeps things: its CTA shape, the launch's parameters, and the shared-memory layout of Q, the
// double-buffered K and V tiles and the ring of pool rows. Included by attention_prefill.cu
// only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/cp_async.cuh"

namespace ds::cuda::ops {
namespace {

constexpr int kWarps = 8;
constexpr int kCtasPerSm = 1;
constexpr int kRows = 16 * kWarps;  // query rows per CTA
constexpr int kKeys = 64;  // keys per tile
constexpr int kThreads = 32 * kWarps;
constexpr int kRowSlots = 4;  // pool rows of this many tiles are held at once (a ring; a power of 2)
constexpr float kLog2e = 1.4426950408889634f;

struct Params {
  PrefillAttention a;
  int32_t group;       // query heads per KV head
  int64_t rows;        // n_tokens * group
  int32_t n_splits;
  float scale_log2;    // softmax scale in the exp2 domain
  float* part_o;       // [n_splits, n_kv, rows, D] unnormalised, when n_splits > 1
  float* part_ml;      // [n_splits, n_kv, rows, 2]: running max (log2 domain) and sum
};

// Q, two K and two V tiles, the ring of pool rows, and room to align the tiles to 1024 bytes.
template <int D>
constexpr size_t prefill_smem_bytes() {
  return static_cast<size_t>(kRows + 4 * kKeys) * D * 2 + kRowSlots * kKeys * sizeof(int64_t) + 1024;
}

// The CTA's shared memory: Q (kRows x D bf16), two K stages and two V stages after it -- tile
// t's K and V sit in stage t & 1 of each, so an iteration reads K(kt + 1) and V(kt) while
// K(kt + 2) and V(kt + 1) load into the others -- all in wgmma's 128-byte swizzled layout, then
// the pool rows of tile t (tile_rows) in slot t & (kRowSlots - 1): a slot is rewritten two
// iterations after its V load was issued.
template <int D>
struct PrefillSmem {
  static constexpr int kRegions = D / 64;  // 64-column regions of a swizzled tile
  static constexpr int kQBytes = kRows * D * 2, kTileBytes = kKeys * D * 2;
  uint8_t* base;  // 1024-byte aligned: the swizzle is a function of the shared address
  __device__ __forceinline__ explicit PrefillSmem(uint8_t* raw)
      : base(raw + ((1024 - (detail::smem_addr(raw) & 1023)) & 1023)) {}
  __device__ __forceinline__ uint8_t* q() const { return base; }
  __device__ __forceinline__ uint8_t* k_tile(int32_t t) const { return base + kQBytes + kTileBytes * (t & 1); }
  __device__ __forceinline__ uint8_t* v_tile(int32_t t) const { return base + kQBytes + kTileBytes * (2 + (t & 1)); }
  __device__ __forceinline__ int64_t* rows(int32_t t) const {
    return reinterpret_cast<int64_t(*)[kKeys]>(base + kQBytes + 4 * kTileBytes)[t & (kRowSlots - 1)];
  }
};

}  // namespace
}  // namespace ds::cuda::ops
