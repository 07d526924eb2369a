// Bulk tensor copies (TMA, sm_90) and the shared-memory barriers that count their bytes, as
// the decode kernel uses them: one thread issues a whole 16-row K or V tile with one
// instruction, and the warps wait on the stage's barrier instead of on cp.async groups.
// The delta rule's scan (delta_rule_tc.cu) copies whole scratch tiles with the 1-D form.
// NVIDIA sm_90+ only: declared in nvcc's sm_90 device pass and in its host pass (where device
// bodies are not compiled, but a kernel's calls must name something), never for HIP or an
// older device pass (those callers guard with __CUDA_ARCH__ >= 900).
#pragma once

#include <cstdint>

namespace ds::cuda::detail {

#if defined(__CUDACC__) && !defined(__HIP__) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900)

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes initialised barriers visible to the bulk-copy unit.
__device__ __forceinline__ void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// One arrival that also announces `bytes` of bulk copies the phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// One arrival without bytes (a consumer releasing a stage).
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Returns once the phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory at src to
// shared memory at dst; they complete on barrier bar.
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
// Fetches a tensor map into the SM's descriptor cache ahead of its first copy (otherwise the
// first bulk copy waits for it on a block's start-up chain).
__device__ __forceinline__ void tma_prefetch_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}
// The box of a 3-D tensor map at coordinates (c0, c1, c2) into shared memory at dst; its bytes
// complete on barrier bar. Coordinates outside the tensor read as zeros.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, uint32_t bar, int32_t c0, int32_t c1,
                                            int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

#endif

}  // namespace ds::cuda::detail
