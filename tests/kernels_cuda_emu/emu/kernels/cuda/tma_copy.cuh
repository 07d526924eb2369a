// kernels/cuda/tma_copy.cuh's barriers and 1-D bulk copies, as the delta rule's scan uses them,
// on the CPU emulation (tests/kernels_cuda_emu/gpu_emu.h): a phase completes when its
// arrivals are in and its announced bytes have landed; a bulk copy lands when issued, or with
// late_copies when a thread first waits on its barrier (the latest a GPU may land it).
#pragma once

#include <cstring>
#include <stdexcept>

#include "kernels/cuda/cp_async.cuh"
#include "tests/kernels_cuda_emu/gpu_emu.h"

namespace ds::cuda::detail {

inline emu::MBar& mbar_at(uint32_t bar) {
  const auto it = emu::mbars.find(bar);
  if (it == emu::mbars.end()) throw std::logic_error("mbarrier: used before mbarrier.init");
  return it->second;
}
inline void mbar_settle(emu::MBar& m) {
  if (m.pending == 0 && m.tx == 0) {
    m.phase ^= 1u;
    m.pending = m.count;
  }
}
inline void mbar_init(uint32_t bar, uint32_t arrivals) {
  if (bar % 8 != 0 || bar + 8 > emu::kSmemBytes) throw std::logic_error("mbarrier.init: misaligned or out of range");
  emu::MBar m;
  m.count = m.pending = static_cast<int>(arrivals);
  emu::mbars[bar] = m;
}
inline void mbar_fence_init() {}
inline void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  auto& m = mbar_at(bar);
  if (m.pending <= 0) throw std::logic_error("mbarrier: more arrivals than the phase expects");
  m.tx += bytes;
  --m.pending;
  mbar_settle(m);
}
inline void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  if (dst % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0 || bytes % 16 != 0)
    throw std::logic_error("cp.async.bulk: misaligned address or size");
  if (dst + bytes > emu::kSmemBytes) throw std::logic_error("cp.async.bulk: past shared memory");
  auto& m = mbar_at(bar);
  const emu::Copy c{dst, src, static_cast<int>(bytes), static_cast<int>(bytes)};
  if (emu::late_copies) {
    m.copies.push_back(c);
    return;
  }
  land(c);
  m.tx -= bytes;
  mbar_settle(m);
}
// Returns once the phase of this parity has completed (the barrier's current phase is the
// other parity).
inline void mbar_wait(uint32_t bar, uint32_t parity) {
  for (;;) {
    auto& m = mbar_at(bar);
    if (!m.copies.empty()) {
      for (const auto& c : m.copies) {
        land(c);
        m.tx -= c.bytes;
      }
      m.copies.clear();
      mbar_settle(m);
    }
    if (m.phase != (parity & 1u)) return;
    emu::yield();
  }
}

}  // namespace ds::cuda::detail
