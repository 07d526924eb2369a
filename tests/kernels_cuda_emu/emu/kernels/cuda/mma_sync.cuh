// kernels/cuda/mma_sync.cuh's wrappers that the delta-rule kernels use, on the CPU emulation
// (tests/kernels_cuda_emu/gpu_emu.h): ldmatrix and mma.sync over the emulated warp.
#pragma once

#include <cstdint>

#include "tests/kernels_cuda_emu/gpu_emu.h"

namespace ds::cuda::detail {

inline void ldsm_x4(uint32_t (&r)[4], uint32_t addr) { emu::ldmatrix_x4(r, addr, false); }
inline void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) { emu::ldmatrix_x4(r, addr, true); }
template <bool F16>
void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  static_assert(!F16, "the emulation has bf16 operands only");
  emu::mma_bf16(c, a, b0, b1);
}

inline uint32_t to_tf32(float x) { return emu::to_tf32(x); }
inline void mma1688_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) { emu::mma_tf32(c, a, b0, b1); }

}  // namespace ds::cuda::detail
