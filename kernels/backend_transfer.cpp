// Host transfers (backend.h, "host transfers"): the contract every backend's copies satisfy,
// and the host backend's implementation (plain memory, copied at once).
#include <sys/mman.h>

#include <cstring>
#include <new>
#include <string>

#include "kernels/backend.h"
#include "kernels/contract.h"

namespace ds::kernels {
using namespace contract;

std::shared_ptr<void> Backend::alloc_host(int64_t bytes) {
  DS_REQUIRE(bytes > 0, "alloc_host", "size " + std::to_string(bytes));
  // Mapped lazily, as the CPU backend's pools are: a large host tier costs only what it holds.
  const size_t n = static_cast<size_t>(bytes);
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return std::shared_ptr<void>(p, [n](void* q) { ::munmap(q, n); });
}

uint64_t Backend::transfer(std::span<const HostCopy> copies, bool to_host) {
  for (const HostCopy& c : copies)
    DS_REQUIRE(!c.device.empty() && c.host != nullptr, "transfer", "an empty tensor or a null host address");
  return do_transfer(copies, to_host);
}

uint64_t Backend::do_transfer(std::span<const HostCopy> copies, bool to_host) {
  for (const HostCopy& c : copies) {
    const size_t n = static_cast<size_t>(c.device.bytes());
    if (to_host)
      std::memcpy(c.host, c.device.data(), n);
    else
      std::memcpy(c.device.data(), c.host, n);
  }
  return ++transfers_issued_;
}

}  // namespace ds::kernels
