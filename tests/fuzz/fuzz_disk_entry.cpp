// Fuzz target: a disk-tier file (kvcache/disk_entry.h) -> the reader that decides whether its
// bytes are this model's entry. Invariants: any input is an entry or a refusal with a reason
// (never an exception, a crash or a sanitizer finding); an accepted entry has exactly the
// expected sizes and encodes back to the very bytes it was read from.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "kvcache/disk_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ds::kvcache;
  const DiskEntryExpect expect{0x1234, 4, 48, 20};
  const std::span<const uint8_t> in(data, size);
  std::string why;
  const auto e = decode_disk_entry(in, expect, why);
  if (!e) {
    if (why.empty()) std::abort();  // a refusal always says why
    return 0;
  }
  const bool block = e->kind == DiskEntryKind::block;
  if (e->payload.size() != (block ? 48u : 20u) || e->tokens.size() != (block ? 4u : 0u)) std::abort();
  const auto again = encode_disk_entry(*e);
  if (again.size() != size || !std::equal(again.begin(), again.end(), in.begin())) std::abort();
  return 0;
}
