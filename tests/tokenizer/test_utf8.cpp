// Lossy UTF-8 conversion: the maximal-subpart rule of Rust's from_utf8_lossy (which HF's
// decode uses; Python's errors="replace" follows the same rule, and produced these cases).
#include <catch2/catch.hpp>

#include "model/tokenizer/utf8.h"

namespace utf8 = ds::tok::utf8;

namespace {
const std::string R = "\xEF\xBF\xBD";  // U+FFFD
}

TEST_CASE("lossy conversion replaces each maximal ill-formed subpart once", "[utf8]") {
  struct Case {
    std::string in, out;
  };
  const Case cases[] = {
      {"\xF0\x90\x80" "A", R + "A"},
      {"\xE0\x80", R + R},  // E0 needs A0..BF next
      {"\xED\xA0\x80", R + R + R},  // surrogates are invalid
      {"\xF4\x90", R + R},  // beyond U+10FFFF
      {"\xC0\xAF", R + R},  // overlong
      {"\xE6\x88", R},      // truncated at the end: one replacement
      {"\xFF\xFE" "ab", R + R + "ab"},
      {"a\xC3", "a" + R},
      {"\xF0\x9F\x98", R},
      {"\xE2\x82\xAC\x80", "\xE2\x82\xAC" + R},
      {"\xF5\x80\x80\x80", R + R + R + R},
      {"\xC3\xA9\xE0\xA0\x80\xF0\x90\x80\x80", "\xC3\xA9\xE0\xA0\x80\xF0\x90\x80\x80"},
      {"", ""},
  };
  for (const Case& c : cases) {
    INFO("input bytes: " << c.in.size());
    CHECK(utf8::lossy(c.in) == c.out);
    CHECK(utf8::is_valid(c.in) == (c.in == c.out));
  }
}

TEST_CASE("lossy_prefix holds back only a sequence that may still complete", "[utf8]") {
  std::string out;
  CHECK(utf8::lossy_prefix("ab\xE6\x88", out) == 2);
  CHECK(out == "ab");
  out.clear();
  // 0xE6 0x88 followed by 'A' can never complete: replaced at once.
  CHECK(utf8::lossy_prefix("\xE6\x88" "A", out) == 3);
  CHECK(out == R + "A");
  out.clear();
  CHECK(utf8::lossy_prefix("\xF0", out) == 0);
  CHECK(out.empty());
  out.clear();
  CHECK(utf8::lossy_prefix("\xC0", out) == 1);  // C0 can never start a sequence
  CHECK(out == R);
}

TEST_CASE("lossy conversion in arbitrary steps equals one conversion", "[utf8]") {
  // Every split point of a mixed valid/invalid byte string.
  const std::string bytes =
      "h\xC3\xA9\xE6\x88\x91\xF0\x9F\x98\x80\xE6\x88" "A\xF0\x90\x80\xED\xA0\x80\xC3";
  const std::string whole = utf8::lossy(bytes);
  for (std::size_t a = 0; a <= bytes.size(); ++a) {
    for (std::size_t b = a; b <= bytes.size(); ++b) {
      std::string out, pending;
      for (const std::string& part :
           {bytes.substr(0, a), bytes.substr(a, b - a), bytes.substr(b)}) {
        pending += part;
        pending.erase(0, utf8::lossy_prefix(pending, out));
        CHECK(pending.size() <= 3);
      }
      out += utf8::lossy(pending);
      CHECK(out == whole);
    }
  }
}

TEST_CASE("code point helpers", "[utf8]") {
  std::string s;
  for (char32_t cp : {U'a', U'\u00E9', U'\u4E2D', U'\U0001F600'}) utf8::append(s, cp);
  CHECK(s == "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80");
  CHECK(utf8::length(s) == 4);
  char32_t cp = 0;
  CHECK(utf8::decode_one(s, 1, cp) == 2);
  CHECK(cp == 0xE9);
  CHECK(utf8::decode_one(s, 2, cp) == 0);  // a continuation byte
}
