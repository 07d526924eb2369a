#include "kvcache/disk_entry.h"

#include <cstdio>
#include <cstring>

namespace ds::kvcache {

namespace {

constexpr char kMagic[8] = {'D', 'S', 'K', 'V', 'H', 'T', '0', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kFixed = 8 + 4 + 4 + 8 * 4 + 4 + 4 + 8;  // through the payload size

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
  out.insert(out.end(), b, b + sizeof(T));
}

template <class T>
T get(std::span<const uint8_t> in, size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  return v;
}

}  // namespace

int64_t DiskEntryExpect::max_file_bytes() const {
  const int64_t payload = block_bytes > state_bytes ? block_bytes : state_bytes;
  return static_cast<int64_t>(kFixed) + 4 * int64_t{block_size} + 8 + payload + 8;
}

uint64_t disk_checksum(std::span<const uint8_t> bytes, uint64_t seed) {
  uint64_t h = mix(seed ^ 0x6a09e667f3bcc909ull ^ bytes.size());
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) h = mix(h ^ get<uint64_t>(bytes, i));
  uint64_t tail = 0;
  for (size_t k = 0; i < bytes.size(); ++i, ++k) tail |= uint64_t{bytes[i]} << (8 * k);
  return mix(h ^ tail ^ 0xa5a5a5a5a5a5a5a5ull);
}

std::vector<uint8_t> encode_disk_entry(const DiskEntry& e) {
  std::vector<uint8_t> out;
  out.reserve(kFixed + 4 * e.tokens.size() + 16 + e.payload.size());
  for (char c : kMagic) out.push_back(static_cast<uint8_t>(c));
  put<uint32_t>(out, kVersion);
  put<uint32_t>(out, static_cast<uint32_t>(e.kind));
  put<uint64_t>(out, e.fingerprint);
  put<uint64_t>(out, e.key);
  put<uint64_t>(out, e.check);
  put<uint64_t>(out, e.parent);
  put<uint32_t>(out, static_cast<uint32_t>(e.block_size));
  put<uint32_t>(out, static_cast<uint32_t>(e.tokens.size()));
  put<uint64_t>(out, static_cast<uint64_t>(e.payload.size()));
  for (int32_t t : e.tokens) put<int32_t>(out, t);
  put<uint64_t>(out, disk_checksum(out));
  out.insert(out.end(), e.payload.begin(), e.payload.end());
  put<uint64_t>(out, disk_checksum(e.payload, 1));
  return out;
}

std::optional<DiskEntry> decode_disk_entry(std::span<const uint8_t> in, const DiskEntryExpect& x, std::string& why) {
  auto refuse = [&](const char* what) -> std::optional<DiskEntry> {
    why = what;
    return std::nullopt;
  };
  if (in.size() < kFixed + 16) return refuse("shorter than a header");
  if (std::memcmp(in.data(), kMagic, 8) != 0) return refuse("not a disk-tier entry (magic)");
  if (get<uint32_t>(in, 8) != kVersion) return refuse("another format version");
  const uint32_t kind = get<uint32_t>(in, 12);
  if (kind != 1 && kind != 2) return refuse("an unknown entry kind");
  DiskEntry e;
  e.kind = static_cast<DiskEntryKind>(kind);
  e.fingerprint = get<uint64_t>(in, 16);
  if (e.fingerprint != x.fingerprint) return refuse("another model's entry (fingerprint)");
  e.key = get<uint64_t>(in, 24);
  e.check = get<uint64_t>(in, 32);
  e.parent = get<uint64_t>(in, 40);
  const uint32_t block_size = get<uint32_t>(in, 48);
  const uint32_t n_tokens = get<uint32_t>(in, 52);
  const uint64_t payload = get<uint64_t>(in, 56);
  if (block_size != static_cast<uint32_t>(x.block_size)) return refuse("another block size");
  const bool block = e.kind == DiskEntryKind::block;
  if (n_tokens != (block ? block_size : 0u)) return refuse("a token count that does not fit its kind");
  if (payload != static_cast<uint64_t>(block ? x.block_bytes : x.state_bytes))
    return refuse("a payload size that is not this model's");
  // Now every size is bounded by the model's own: the exact length follows.
  const size_t header = kFixed + 4 * size_t{n_tokens};
  if (in.size() != header + 8 + payload + 8) return refuse("truncated or padded (length)");
  if (get<uint64_t>(in, header) != disk_checksum(in.first(header))) return refuse("a corrupt header (checksum)");
  const auto body = in.subspan(header + 8, payload);
  if (get<uint64_t>(in, header + 8 + payload) != disk_checksum(body, 1)) return refuse("a corrupt payload (checksum)");
  e.block_size = x.block_size;
  e.tokens.resize(n_tokens);
  for (uint32_t i = 0; i < n_tokens; ++i) e.tokens[i] = get<int32_t>(in, kFixed + 4 * size_t{i});
  if (block && chain_key(e.parent, e.tokens) != e.key) return refuse("a key that its parent and tokens do not give");
  if (!block && e.parent != 0) return refuse("a snapshot with a parent key");
  e.payload.assign(body.begin(), body.end());
  return e;
}

std::string disk_entry_name(const DiskEntry& e) {
  char name[96];
  std::snprintf(name, sizeof(name), "%016llx-%c-%016llx-%016llx.dskv", static_cast<unsigned long long>(e.fingerprint),
                e.kind == DiskEntryKind::block ? 'b' : 's', static_cast<unsigned long long>(e.key),
                static_cast<unsigned long long>(e.check));
  return name;
}

}  // namespace ds::kvcache
