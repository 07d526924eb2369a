// DiskEntry: one host-tier entry (a K/V block or a DeltaNet state snapshot) as a file of the
// disk tier (serve --kv-offload-dir; scheduler/disk_tier.h), and the reader that decides
// whether a file's bytes may be trusted.
//
// A file is untrusted input: it may be truncated (a crash mid-write), corrupt, written by
// another model or another version, or planted. decode_disk_entry accepts it only when every
// field is what this model expects -- the magic and version, the model fingerprint (the
// checkpoint, the cache types and geometry), the block size, the payload's exact size for its
// kind, a block's chain key recomputed from its parent key and tokens -- the file's length is
// exactly what the header says, and both checksums (header, payload) match. Anything else is
// a refusal with a reason, never an exception or a partial entry; sizes are checked before
// anything is allocated, so no field can make the reader allocate more than the payload of
// the model's own entries.
//
// Layout (little-endian): "DSKVHT01", u32 version (1), u32 kind (1 block, 2 snapshot),
// u64 fingerprint, key, check, parent key, u32 block size, u32 token count (a block's tokens;
// 0 for a snapshot), u64 payload bytes, i32 tokens[count], u64 header checksum (of all
// before it), payload, u64 payload checksum.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvcache/prefix_key.h"

namespace ds::kvcache {

enum class DiskEntryKind : uint32_t { block = 1, snapshot = 2 };

struct DiskEntry {
  DiskEntryKind kind = DiskEntryKind::block;
  uint64_t fingerprint = 0;
  PrefixKey key = 0, check = 0, parent = 0;  // parent: a block's parent key (the chain root for a first block; 0 for a snapshot)
  int32_t block_size = 0;
  std::vector<int32_t> tokens;  // a block's tokens
  std::vector<uint8_t> payload;
};

// What a file must be to be read as this model's entry.
struct DiskEntryExpect {
  uint64_t fingerprint = 0;
  int32_t block_size = 0;
  int64_t block_bytes = 0;  // a block's payload
  int64_t state_bytes = 0;  // a snapshot's payload
  int64_t max_file_bytes() const;
};

// A 64-bit checksum of bytes (not cryptographic: it catches corruption, not an attacker who
// can write the directory -- whoever can is trusted as the server's own user is).
uint64_t disk_checksum(std::span<const uint8_t> bytes, uint64_t seed = 0);

std::vector<uint8_t> encode_disk_entry(const DiskEntry& e);
// The entry, or nullopt with `why` set.
std::optional<DiskEntry> decode_disk_entry(std::span<const uint8_t> bytes, const DiskEntryExpect& expect,
                                           std::string& why);
// The file name of an entry: "<fingerprint>-<b|s>-<key>-<check>.dskv" in hex, so an entry's
// name is its model and its content.
std::string disk_entry_name(const DiskEntry& e);

}  // namespace ds::kvcache
