// kernels/cuda/decode_tc_ptx.cuh's wrappers that the delta-rule kernels use, on the CPU
// emulation (tests/kernels_cuda_emu/gpu_emu.h): shared addresses are offsets into the
// emulated shared memory, cp.async copies at once.
#pragma once

#include <cstring>

#include "tests/kernels_cuda_emu/gpu_emu.h"

namespace ds::cuda::detail {

inline uint32_t smem_addr(const void* p) {
  const auto* b = static_cast<const uint8_t*>(p);
  if (b < emu::shared_mem || b >= emu::shared_mem + emu::kSmemBytes) throw std::logic_error("smem_addr: not shared");
  return static_cast<uint32_t>(b - emu::shared_mem);
}
template <int N>
void cp_async(uint32_t dst, const void* src, int src_bytes) {
  if (dst % N != 0 || reinterpret_cast<uintptr_t>(src) % N != 0) throw std::logic_error("cp_async: misaligned");
  if (dst + N > emu::kSmemBytes) throw std::logic_error("cp_async: past shared memory");
  std::memset(emu::shared_mem + dst, 0, N);
  std::memcpy(emu::shared_mem + dst, src, static_cast<size_t>(src_bytes));
}
inline void cp_async_commit() {}
template <int N>
void cp_async_wait() {}
inline void ldsm_x4(uint32_t (&r)[4], uint32_t addr) { emu::ldmatrix_x4(r, addr, false); }
inline void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) { emu::ldmatrix_x4(r, addr, true); }
template <bool F16>
void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  static_assert(!F16, "the emulation has bf16 operands only");
  emu::mma_bf16(c, a, b0, b1);
}

}  // namespace ds::cuda::detail
