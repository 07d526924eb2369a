// The disk tier's file format (kvcache/disk_entry.h): an entry round-trips, and a file that
// is anything but this model's intact entry -- any single byte changed, any truncation or
// padding, another fingerprint, block size or payload size, a key its tokens do not give --
// is refused with a reason.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include "kvcache/disk_entry.h"
#include "tests/test_paths.h"

using namespace ds::kvcache;

namespace {

DiskEntryExpect expect() { return {0x1234, 4, 48, 20}; }

DiskEntry block_entry() {
  DiskEntry e;
  e.kind = DiskEntryKind::block;
  e.fingerprint = 0x1234;
  e.block_size = 4;
  e.tokens = {5, 6, 7, 8};
  e.parent = 0x99;
  e.key = chain_key(e.parent, e.tokens);
  e.check = 0x777;
  for (int i = 0; i < 48; ++i) e.payload.push_back(static_cast<uint8_t>(i * 7));
  return e;
}

}  // namespace

TEST_CASE("disk entry: a block and a snapshot round-trip", "[disk_entry]") {
  std::string why;
  const DiskEntry b = block_entry();
  const auto got = decode_disk_entry(encode_disk_entry(b), expect(), why);
  REQUIRE(got);
  CHECK(got->kind == DiskEntryKind::block);
  CHECK(got->key == b.key);
  CHECK(got->check == b.check);
  CHECK(got->parent == b.parent);
  CHECK(got->tokens == b.tokens);
  CHECK(got->payload == b.payload);
  CHECK(disk_entry_name(*got) == disk_entry_name(b));
  CHECK(disk_entry_name(b).find("0000000000001234-b-") == 0);
  DiskEntry s;
  s.kind = DiskEntryKind::snapshot;
  s.fingerprint = 0x1234;
  s.block_size = 4;
  s.key = 1;
  s.check = 2;
  s.payload.assign(20, 3);
  const auto gs = decode_disk_entry(encode_disk_entry(s), expect(), why);
  REQUIRE(gs);
  CHECK(gs->payload == s.payload);
  CHECK(gs->tokens.empty());
}

TEST_CASE("disk entry: every changed byte, truncation and padding is refused", "[disk_entry]") {
  const std::vector<uint8_t> good = encode_disk_entry(block_entry());
  std::string why;
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t flip : {uint8_t{1}, uint8_t{0x80}}) {
      std::vector<uint8_t> bad = good;
      bad[i] ^= flip;
      INFO("byte " << i);
      CHECK_FALSE(decode_disk_entry(bad, expect(), why));
    }
  }
  for (size_t n = 0; n < good.size(); ++n)
    CHECK_FALSE(decode_disk_entry(std::span<const uint8_t>(good).first(n), expect(), why));
  std::vector<uint8_t> padded = good;
  padded.push_back(0);
  CHECK_FALSE(decode_disk_entry(padded, expect(), why));
  CHECK(why.find("length") != std::string::npos);
}

TEST_CASE("disk entry: another model's, another geometry's or an inconsistent entry is refused", "[disk_entry]") {
  std::string why;
  const std::vector<uint8_t> good = encode_disk_entry(block_entry());
  DiskEntryExpect other = expect();
  other.fingerprint = 0x4321;
  CHECK_FALSE(decode_disk_entry(good, other, why));
  CHECK(why.find("fingerprint") != std::string::npos);
  other = expect();
  other.block_size = 8;
  CHECK_FALSE(decode_disk_entry(good, other, why));
  other = expect();
  other.block_bytes = 64;
  CHECK_FALSE(decode_disk_entry(good, other, why));
  // Checksums recomputed by a writer that got the key wrong: still refused.
  DiskEntry wrong = block_entry();
  wrong.key ^= 1;
  CHECK_FALSE(decode_disk_entry(encode_disk_entry(wrong), expect(), why));
  CHECK(why.find("key") != std::string::npos);
  DiskEntry snap;
  snap.kind = DiskEntryKind::snapshot;
  snap.fingerprint = 0x1234;
  snap.block_size = 4;
  snap.parent = 5;
  snap.payload.assign(20, 0);
  CHECK_FALSE(decode_disk_entry(encode_disk_entry(snap), expect(), why));
  CHECK(expect().max_file_bytes() >= static_cast<int64_t>(good.size()));
}

TEST_CASE("disk entry: the fuzz corpus's seeds are what they say (valid entries, a truncated one)", "[disk_entry]") {
  // tests/fuzz/corpus/disk_entry was written by another implementation of the format (a
  // script): its valid seeds decode, so the fuzzer starts from inputs that reach the end.
  auto read = [](const std::string& name) {
    std::ifstream in(ds::test::source_dir() + "/tests/fuzz/corpus/disk_entry/" + name, std::ios::binary);
    REQUIRE(in);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
  };
  std::string why;
  const auto block = decode_disk_entry(read("block"), expect(), why);
  REQUIRE(block);
  CHECK(block->tokens == block_entry().tokens);
  CHECK(block->payload == block_entry().payload);
  CHECK(encode_disk_entry(*block) == read("block"));
  CHECK(decode_disk_entry(read("snapshot"), expect(), why));
  CHECK_FALSE(decode_disk_entry(read("truncated"), expect(), why));
}
