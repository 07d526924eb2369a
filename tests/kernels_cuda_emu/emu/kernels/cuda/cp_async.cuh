// kernels/cuda/cp_async.cuh on the CPU emulation (tests/kernels_cuda_emu/gpu_emu.h): shared
// addresses are offsets into the emulated shared memory; a cp.async copies at once, or with
// late_copies when a wait lets its group land.
#pragma once

#include <cstring>
#include <stdexcept>
#include <vector>

#include "tests/kernels_cuda_emu/gpu_emu.h"

namespace ds::cuda::detail {

inline uint32_t smem_addr(const void* p) {
  const auto* b = static_cast<const uint8_t*>(p);
  if (b < emu::shared_mem || b >= emu::shared_mem + emu::kSmemBytes) throw std::logic_error("smem_addr: not shared");
  return static_cast<uint32_t>(b - emu::shared_mem);
}
inline void land(const emu::Copy& c) {
  std::memset(emu::shared_mem + c.dst, 0, static_cast<size_t>(c.size));
  std::memcpy(emu::shared_mem + c.dst, c.src, static_cast<size_t>(c.bytes));
}
inline std::vector<std::vector<emu::Copy>>& my_groups() {
  auto& g = emu::copies[static_cast<size_t>(emu::current)];
  if (g.empty()) g.emplace_back();
  return g;
}
template <int N>
void cp_async(uint32_t dst, const void* src, int src_bytes) {
  if (dst % N != 0 || reinterpret_cast<uintptr_t>(src) % N != 0) throw std::logic_error("cp_async: misaligned");
  if (dst + N > emu::kSmemBytes) throw std::logic_error("cp_async: past shared memory");
  const emu::Copy c{dst, src, src_bytes, N};
  if (emu::late_copies)
    my_groups().back().push_back(c);
  else
    land(c);
}
inline void cp_async_commit() {
  if (emu::late_copies) my_groups().emplace_back();
}
// All but the newest N committed groups land (the open, uncommitted one stays open).
template <int N>
void cp_async_wait() {
  if (!emu::late_copies) return;
  auto& g = my_groups();
  const size_t committed = g.size() - 1;
  const size_t done = committed > static_cast<size_t>(N) ? committed - N : 0;
  for (size_t i = 0; i < done; ++i)
    for (const auto& c : g[i]) land(c);
  g.erase(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(done));
}

}  // namespace ds::cuda::detail
