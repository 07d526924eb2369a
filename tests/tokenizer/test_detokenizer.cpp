// IncrementalDetokenizer: for any id sequence, the streamed pieces are valid UTF-8 and
// concatenate to decode(all ids) exactly.
#include <random>

#include <catch2/catch.hpp>

#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/incremental_detokenizer.h"
#include "model/tokenizer/utf8.h"
#include "tests/tokenizer/tokenizers.h"

using ds::tok::IncrementalDetokenizer;
using ds::tok::Tokenizer;

namespace {

// Streams `ids` and checks both guarantees; returns the concatenated text.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDetokenizer detok(tok, skip_special);
  std::string all;
  for (const int32_t id : ids) {
    const std::string piece = detok.push(id);
    REQUIRE(ds::tok::utf8::is_valid(piece));
    REQUIRE(detok.pending_bytes() <= 3);
    all += piece;
  }
  const std::string tail = detok.flush();
  REQUIRE(ds::tok::utf8::is_valid(tail));
  CHECK(detok.pending_bytes() == 0);
  all += tail;
  CHECK(all == tok.decode(ids, skip_special));
  return all;
}

// Ids of the single-byte tokens spelling `bytes`: a stream that cuts every multi-byte
// character into its bytes.
std::vector<int32_t> byte_tokens(const Tokenizer& tok, std::string_view bytes) {
  const auto& alphabet = ds::tok::ByteLevelAlphabet::get();
  std::vector<int32_t> ids;
  for (const char c : bytes) ids.push_back(*tok.token_id(alphabet.text_of(static_cast<unsigned char>(c))));
  return ids;
}

std::string random_unicode(std::mt19937& rng, std::size_t n) {
  static const char32_t ranges[][2] = {{0x20, 0x7E},       {0xA0, 0x2FF},     {0x300, 0x36F},
                                       {0x4E00, 0x9FFF},   {0x3040, 0x30FF},  {0xAC00, 0xD7A3},
                                       {0x1F300, 0x1FAFF}, {0x10000, 0x1000F}};
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& r = ranges[rng() % std::size(ranges)];
    ds::tok::utf8::append(s, r[0] + rng() % (r[1] - r[0] + 1));
  }
  return s;
}

}  // namespace

TEST_CASE("detokenizer streams the fixture's emoji ids without partial characters",
          "[tokenizer][detokenizer]") {
  const auto& tok = ds::test::qwen3_tokenizer();
  // "emoji 😀🎉👍🏽 family 👨‍👩‍👧" from the HF reference: several ids are single bytes.
  const std::vector<int32_t> ids = {37523, 90316, 144841, 144349, 145375, 2997, 61804,
                                    101,   378,   235,    145233, 378,    235,  145665};
  IncrementalDetokenizer detok(tok);
  std::vector<std::string> pieces;
  for (const int32_t id : ids) pieces.push_back(detok.push(id));
  pieces.push_back(detok.flush());
  std::string all;
  for (const auto& p : pieces) {
    CHECK(ds::tok::utf8::is_valid(p));
    all += p;
  }
  CHECK(all == "emoji 😀🎉👍🏽 family 👨‍👩‍👧");
  // Token 61804 is " \xF0\x9F\x91" (a space and 3 bytes of 👨): only the space is final.
  CHECK(pieces[6] == " ");
}

TEST_CASE("detokenizer: random text cut into single bytes", "[tokenizer][detokenizer]") {
  const auto& tok = ds::test::qwen3_tokenizer();
  std::mt19937 rng(1234);
  for (int round = 0; round < 200; ++round) {
    const std::string text = random_unicode(rng, 1 + rng() % 40);
    const auto ids = byte_tokens(tok, text);
    CHECK(stream(tok, ids, false) == text);
  }
}

TEST_CASE("detokenizer: random id sequences, special tokens kept and skipped",
          "[tokenizer][detokenizer]") {
  for (const Tokenizer* tok : {&ds::test::qwen3_tokenizer(), &ds::test::tiny_tokenizer()}) {
    std::mt19937 rng(99);
    const auto specials = tok->added_tokens();
    for (int round = 0; round < 500; ++round) {
      std::vector<int32_t> ids;
      const std::size_t n = rng() % 30;
      for (std::size_t i = 0; i < n; ++i) {
        const unsigned kind = rng() % 10;
        if (kind == 0) {
          ids.push_back(specials[rng() % specials.size()].id);
        } else if (kind == 1) {
          ids.push_back(tok->vocab_size() + static_cast<int32_t>(rng() % 5));  // unknown
        } else if (kind < 5) {
          // Single-byte tokens of arbitrary bytes: invalid and truncated UTF-8 galore.
          const auto b = byte_tokens(*tok, std::string(1, static_cast<char>(rng() % 256)));
          ids.insert(ids.end(), b.begin(), b.end());
        } else {
          ids.push_back(static_cast<int32_t>(rng() % static_cast<unsigned>(tok->vocab_size())));
        }
      }
      stream(*tok, ids, false);
      stream(*tok, ids, true);
    }
  }
}

TEST_CASE("detokenizer: encoded text streams back to itself", "[tokenizer][detokenizer]") {
  const auto& tok = ds::test::qwen3_tokenizer();
  std::mt19937 rng(7);
  for (int round = 0; round < 100; ++round) {
    const std::string text = random_unicode(rng, 1 + rng() % 60);
    const auto ids = tok.encode(text);
    stream(tok, ids, false);
  }
}

TEST_CASE("detokenizer: a stream ending inside a character flushes one U+FFFD",
          "[tokenizer][detokenizer]") {
  const auto& tok = ds::test::qwen3_tokenizer();
  const auto ids = byte_tokens(tok, "ok\xE4\xB8");  // "ok" + 2 of the 3 bytes of 中
  IncrementalDetokenizer detok(tok);
  std::string out;
  for (const int32_t id : ids) out += detok.push(id);
  CHECK(out == "ok");
  CHECK(detok.pending_bytes() == 2);
  CHECK(detok.flush() == "\xEF\xBF\xBD");
  CHECK(tok.decode(ids) == "ok\xEF\xBF\xBD");
}
