// Randomized robustness: arbitrary bytes into encode never crash or hang, produce ids the
// tokenizer knows, and decode back to the input's lossy, normalized form.
#include <chrono>
#include <random>

#include <catch2/catch.hpp>

#include "model/tokenizer/utf8.h"
#include "tests/tokenizer/tokenizers.h"

namespace {

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  // Bias towards bytes that matter: ASCII, UTF-8 leads and continuations, '<' '|' of control
  // tokens, white space.
  static const std::string interesting = "<|>im_startend\n\r\t '\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\xCC\x81";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned k = rng() % 4;
    s += k == 0 ? static_cast<char>(rng() % 256) : interesting[rng() % interesting.size()];
  }
  return s;
}

}  // namespace

TEST_CASE("fuzz: random bytes through encode and decode", "[tokenizer][fuzz]") {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (const ds::tok::Tokenizer* tok : {&ds::test::tiny_tokenizer(), &ds::test::qwen3_tokenizer()}) {
    std::mt19937 rng(2024);
    for (int round = 0; round < 3000 && std::chrono::steady_clock::now() < deadline; ++round) {
      const std::string text = random_bytes(rng, rng() % 200);
      for (const bool allow_special : {true, false}) {
        const auto ids = tok->encode(text, allow_special);
        for (const int32_t id : ids) REQUIRE((id >= 0 && id < tok->vocab_size()));
        const std::string back = tok->decode(ids);
        REQUIRE(ds::tok::utf8::is_valid(back));
        // Text without combining marks or other code points >= U+0300 is already NFC, so it
        // must come back unchanged (after the lossy conversion of invalid bytes).
        const std::string valid = ds::tok::utf8::lossy(text);
        bool below_0300 = true;
        for (const char c : valid) below_0300 &= static_cast<unsigned char>(c) < 0xCC;
        if (below_0300) REQUIRE(back == valid);
      }
    }
  }
}
