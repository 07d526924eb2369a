// PTX wrappers of Hopper's warpgroup MMA (wgmma.mma_async, sm_90a): the shared-memory matrix
// descriptor for the 128-byte swizzle, the fences and group waits, and the one instruction
// shape the prefill attention kernel uses, m64n64k16 bf16 -> f32, with A from shared memory
// (SS) or from registers (RS).
//
// The 128-byte swizzled layout (PTX ISA, "Shared Memory Matrix Layout"): a tile is stored as
// 64-column (128-byte) regions, each a run of 128-byte rows; within each 1024-byte group of
// eight rows the 16-byte chunk index is XORed with the row index mod 8. Each region starts at a
// 1024-byte multiple. The same bytes serve as a K-major operand (rows = M or N, columns = K) and
// as an MN-major one (rows = K, columns = N), so a [key][head_dim] tile is both Kᵀ's and V's B.
#pragma once

#include <cstdint>

namespace ds::cuda::detail {

// Byte offset of 16-byte chunk c (0 .. cols / 8 - 1) of row r in a swizzled tile of kTileRows
// rows (64-column regions of kTileRows * 128 bytes).
template <int kTileRows>
__device__ __forceinline__ uint32_t sw128_offset(int r, int c) {
  return static_cast<uint32_t>((c / 8) * kTileRows * 128 + r * 128 + (((c % 8) ^ (r % 8)) * 16));
}

// Descriptor of a 128-byte-swizzled operand at shared address `addr`. K-major: `sbo` is the
// step between groups of eight rows (1024), `lbo` unused. MN-major: `lbo` is the step between
// 64-column regions along N, `sbo` the step between groups of eight K rows (1024).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>((lbo & 0x3FFFF) >> 4) << 16) |
         (static_cast<uint64_t>((sbo & 0x3FFFF) >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

// Orders this thread's generic-proxy shared-memory writes (st.shared, cp.async) before later
// reads by the async proxy (wgmma); a barrier must follow before another thread's wgmma.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins registers an asynchronous MMA writes (accumulators) or reads (register A fragments)
// in program order after its wait: the compiler sees the asm rewrite them, so no read moves
// before the wait and the registers are not reused while the MMA may still touch them.
template <int N>
__device__ __forceinline__ void wgmma_hold(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void wgmma_hold(uint32_t (&a)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// d (+)= A B for a 64 x 64 x 16 step: A (64 x 16, K-major) and B (64 x 16 as N x K, K-major)
// from shared memory. `accumulate` false overwrites d.
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}

// d += A B for a 64 x 64 x 16 step: A from registers (the mma.sync m16n8k16 A fragment of each
// warp's 16 rows), B from shared memory MN-major (16 K rows of 64 N columns).
__device__ __forceinline__ void wgmma_m64n64k16_rs_bt(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

}  // namespace ds::cuda::detail
