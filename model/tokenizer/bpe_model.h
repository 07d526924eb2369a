// The BPE model of a byte-level HF tokenizer: vocabulary, merge ranks, and the merge loop.
//
// A piece (bytes from the pre-tokenizer) starts as one symbol per byte, each the vocabulary
// id of that byte's byte-level character. The merge loop then repeatedly applies the
// lowest-ranked merge among adjacent symbol pairs, leftmost first among equal ranks, which is
// exactly HF's order. Candidate merges sit in a binary heap and the symbols in a linked list,
// so a piece of n bytes costs O(n log n) even when it is a megabyte of one letter; stale heap
// entries are recognised and dropped when popped.
//
// Results for pieces up to 46 bytes are cached, because real text repeats its words: 64K
// fixed slots shared by all threads (16 shards under mutexes; a new piece replaces the one in
// its slot), so a cache miss allocates nothing.
// The merge table itself is open-addressed with a Bloom filter in front (most pairs a text
// asks about do not merge), and its answers are also cached per thread in a small
// direct-mapped table, because its probes are cache misses and text keeps asking about the
// same pairs.
//
// Supported model options: ignore_merges (a piece that is itself a vocabulary token is that
// token), unk_token (used for a byte with no vocabulary entry; without it such a byte is
// dropped, as HF does). dropout, byte_fallback and subword prefixes/suffixes belong to other
// tokenizer kinds and are refused at load time.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds::tok {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};
using TokenIndex = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  BpeModel();
  ~BpeModel();
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;

  // Builds from the "model" object of tokenizer.json. Throws TokenizerError for a model type
  // other than BPE, unsupported options, or merges naming tokens missing from the vocabulary.
  static BpeModel from_json(const nlohmann::json& model);

  // Appends the ids of one piece (raw bytes) to `out`.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  // Vocabulary access (by the token's byte-level spelling, e.g. "Ġthe").
  std::optional<int32_t> token_id(std::string_view text) const;
  const std::vector<std::string>& id_to_text() const { return id_to_text_; }

 private:
  void merge(std::string_view piece, std::vector<int32_t>& out) const;

  TokenIndex text_to_id_;
  std::vector<std::string> id_to_text_;  // "" for ids the vocabulary skips
  std::array<int32_t, 256> byte_id_{};   // -1 when the byte's character is not a token
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;

  struct MergeTable;
  std::unique_ptr<MergeTable> merges_;
  struct Cache;
  std::unique_ptr<Cache> cache_;
  uint64_t serial_ = 0;  // identifies this model in per-thread caches
};

}  // namespace ds::tok
