// The stages of the tokenizer on small hand-made configurations: regex dialect, Split
// behaviours, BPE merge order, added-token matching rules, and long inputs.
#include <catch2/catch.hpp>

#include <atomic>
#include <random>
#include <thread>

#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/normalizer.h"
#include "model/tokenizer/utf8.h"
#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/regex.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizers.h"

using ds::tok::Tokenizer;
using nlohmann::json;

namespace {

std::vector<std::string> matches(const ds::tok::Regex& re, std::string_view text) {
  std::vector<std::string> out;
  re.find_all(text, [&](std::size_t b, std::size_t e) { out.emplace_back(text.substr(b, e - b)); });
  return out;
}

std::vector<std::string> pieces(const json& pre, std::string_view text) {
  const auto p = ds::tok::PreTokenizer::from_json(pre);
  ds::tok::Pieces out;
  p.split(text, out);
  return {out.views.begin(), out.views.end()};
}

// A byte-level BPE whose ids 0..255 are the bytes in order, then the given merges' results in
// order (ids 256, 257, ...), plus added tokens.
json make_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges,
                    const json& added = json::array(), const json& normalizer = nullptr) {
  const auto& alphabet = ds::tok::ByteLevelAlphabet::get();
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[std::string(alphabet.text_of(static_cast<unsigned char>(b)))] = b;
  json merge_list = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    merge_list.push_back({a, b});
  }
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", normalizer},
          {"pre_tokenizer",
           {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
}

json added_token(int id, const std::string& content, bool special, bool normalized,
                 bool lstrip = false, bool rstrip = false, bool single_word = false) {
  return {{"id", id},           {"content", content}, {"special", special},
          {"normalized", normalized}, {"lstrip", lstrip}, {"rstrip", rstrip},
          {"single_word", single_word}};
}

std::vector<int32_t> bytes_of(std::string_view s) {
  std::vector<int32_t> ids;
  for (const char c : s) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace

TEST_CASE("regex: \\s and \\w follow Oniguruma's Unicode classes", "[tokenizer][regex]") {
  const ds::tok::Regex space("\\s+");
  // NEL (U+0085) and NBSP are white space; U+180E (a format character) and ZWSP are not.
  CHECK(matches(space, "a\xC2\x85" "b") == std::vector<std::string>{"\xC2\x85"});
  CHECK(matches(space, "a\xC2\xA0" "b") == std::vector<std::string>{"\xC2\xA0"});
  CHECK(matches(space, "a\xE1\xA0\x8E" "b\xE2\x80\x8B").empty());
  const ds::tok::Regex not_space_letter("[^\\s\\p{L}]+");
  CHECK(matches(not_space_letter, "a\xE1\xA0\x8E" "b") == std::vector<std::string>{"\xE1\xA0\x8E"});
  const ds::tok::Regex word("\\w+");
  CHECK(matches(word, "e\xCC\x81t\xC3\xA9_1 x") == std::vector<std::string>{"e\xCC\x81t\xC3\xA9_1", "x"});
  const ds::tok::Regex non_space("\\S+");
  CHECK(matches(non_space, "ab\xC2\x85" "cd") == std::vector<std::string>{"ab", "cd"});
  CHECK(ds::tok::Regex::rewrite_for_pcre2("[]\\s]") == "[]\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}"
                                                        "\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}]");
  CHECK_THROWS_AS(ds::tok::Regex("(unclosed"), ds::tok::TokenizerError);
}

TEST_CASE("regex: the case-insensitive contraction group and lookahead", "[tokenizer][regex]") {
  const ds::tok::Regex re("(?i:'s|'t|'re|'ve|'m|'ll|'d)|\\s+(?!\\S)|\\s+|\\p{L}+");
  CHECK(matches(re, "DON'T it'S  x") ==
        std::vector<std::string>{"DON", "'T", " ", "it", "'S", " ", " ", "x"});
}

TEST_CASE("pre-tokenizer: Split behaviours and invert", "[tokenizer][pretok]") {
  const auto split = [](const std::string& behavior, bool invert) {
    return json{{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior},
                {"invert", invert}};
  };
  const std::string text = "a-b--c-";
  using V = std::vector<std::string>;
  CHECK(pieces(split("Isolated", false), text) == V{"a", "-", "b", "-", "-", "c", "-"});
  CHECK(pieces(split("Removed", false), text) == V{"a", "b", "c"});
  CHECK(pieces(split("MergedWithPrevious", false), text) == V{"a-", "b-", "-", "c-"});
  CHECK(pieces(split("MergedWithNext", false), text) == V{"a", "-b", "-", "-c", "-"});
  CHECK(pieces(split("Contiguous", false), text) == V{"a", "-", "b", "--", "c", "-"});
  CHECK(pieces(split("Removed", true), text) == V{"-", "-", "-", "-"});
  CHECK(pieces(json{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}},
               "hi  there") == V{" hi", " ", " there"});
  CHECK(pieces(nullptr, "as is") == V{"as is"});
  CHECK_THROWS_AS(ds::tok::PreTokenizer::from_json({{"type", "Whitespace"}}),
                  ds::tok::TokenizerError);
  CHECK_THROWS_AS(ds::tok::PreTokenizer::from_json(split("Sideways", false)),
                  ds::tok::TokenizerError);
}

TEST_CASE("BPE: lowest rank first, leftmost among equal ranks", "[tokenizer][bpe]") {
  {
    const auto tok = Tokenizer::from_json_text(make_tokenizer({{"b", "c"}, {"a", "b"}}).dump(), "t");
    CHECK(tok.encode("abc") == std::vector<int32_t>{'a', 256});
  }
  {
    const auto tok = Tokenizer::from_json_text(make_tokenizer({{"a", "b"}, {"b", "c"}}).dump(), "t");
    CHECK(tok.encode("abc") == std::vector<int32_t>{256, 'c'});
  }
  {
    const auto tok =
        Tokenizer::from_json_text(make_tokenizer({{"a", "a"}, {"aa", "aa"}}).dump(), "t");
    CHECK(tok.encode("aaa") == std::vector<int32_t>{256, 'a'});
    CHECK(tok.encode("aaaa") == std::vector<int32_t>{257});
    CHECK(tok.encode("aaaaa") == std::vector<int32_t>{257, 'a'});
    CHECK(tok.encode("aaaaaa") == std::vector<int32_t>{257, 256});
  }
}

TEST_CASE("BPE: a 256 KiB word and whitespace run stay fast and exact", "[tokenizer][bpe]") {
  const auto& tok = ds::test::qwen3_tokenizer();
  // Quadratic merging or regex backtracking would not finish within the test timeout.
  const std::string word(1 << 18, 'a');
  const auto ids = tok.encode(word);
  CHECK(tok.decode(ids) == word);
  // The HF reference encodes 300 "a" as 37 x "aaaaaaaa" (69440) then "aaaa" (28458).
  const auto short_ids = tok.encode(std::string(300, 'a'));
  CHECK(std::count(short_ids.begin(), short_ids.end(), 69440) == 37);
  CHECK(short_ids.back() == 28458);
  const std::string spaces = std::string(1 << 18, ' ') + "x" + std::string(1 << 17, '\n');
  CHECK(tok.decode(tok.encode(spaces)) == spaces);
}

TEST_CASE("added tokens: leftmost-longest, special gating, strip and word rules",
          "[tokenizer][added]") {
  const json added = json::array({added_token(300, "<a>", true, false),
                                  added_token(301, "<a><b>", true, false),
                                  added_token(302, "<m>", false, false, true, true),
                                  added_token(303, "hey", false, false, false, false, true),
                                  added_token(304, "\xC3\xA9", false, true)});
  const auto tok = Tokenizer::from_json_text(
      make_tokenizer({}, added, {{"type", "NFC"}}).dump(), "t");
  CHECK(tok.encode("x<a><b>y") == cat({{'x', 301, 'y'}}));
  CHECK(tok.encode("<a><a>") == std::vector<int32_t>{300, 300});
  // Not special-gated: special tokens become text; <m> (not special) still matches.
  CHECK(tok.encode("<a>", false) == bytes_of("<a>"));
  // lstrip + rstrip absorb the surrounding white space.
  CHECK(tok.encode("p  <m>\t q") == cat({{'p', 302, 'q'}}));
  // single_word: only when not touching a word character.
  CHECK(tok.encode("hey you") == cat({{303}, bytes_of(" you")}));
  CHECK(tok.encode("heyyou") == bytes_of("heyyou"));
  CHECK(tok.encode("_hey") == bytes_of("_hey"));
  CHECK(tok.encode("(hey)") == cat({{'('}, {303}, {')'}}));
  // normalized=true tokens are matched after NFC: "e" + U+0301 becomes U+00E9.
  CHECK(tok.encode("e\xCC\x81!") == std::vector<int32_t>{304, '!'});
  CHECK(tok.decode(std::vector<int32_t>{300, 'x'}) == "<a>x");
  CHECK(tok.decode(std::vector<int32_t>{300, 'x'}, true) == "x");
  // HF's ByteLevel decoder quirk, reproduced: "\u00E9" is a character of the byte-level
  // alphabet (it stands for byte 0xE9), so the added token decodes to that lone byte.
  CHECK(tok.decode(std::vector<int32_t>{304}) == "\xEF\xBF\xBD");
}

TEST_CASE("invalid UTF-8 input is encoded as its lossy conversion", "[tokenizer]") {
  const auto& tok = ds::test::qwen3_tokenizer();
  const std::string bad = "ok\xFF\xE6\x88 end\xC3";
  const auto ids = tok.encode(bad);
  CHECK(tok.decode(ids) == "ok\xEF\xBF\xBD\xEF\xBF\xBD end\xEF\xBF\xBD");
  CHECK(ids == tok.encode("ok\xEF\xBF\xBD\xEF\xBF\xBD end\xEF\xBF\xBD"));
}

TEST_CASE("NFC quick check never skips text that NFC would change", "[tokenizer][nfc]") {
  using ds::tok::Normalizer;
  CHECK(Normalizer::nfc_quick_check("plain ASCII, Latin-1 \xC3\xA9 and \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80"));
  CHECK(Normalizer::nfc_quick_check("\xEA\xB0\x80"));                  // Hangul syllable GA
  CHECK_FALSE(Normalizer::nfc_quick_check("e\xCC\x81"));               // e + combining acute
  CHECK_FALSE(Normalizer::nfc_quick_check("\xEA\xB0\x80\xE1\x86\xA8"));  // GA + final jamo = GAG
  CHECK_FALSE(Normalizer::nfc_quick_check("\xE3\x81\x8B\xE3\x82\x99"));  // ka + voiced mark = ga
  CHECK_FALSE(Normalizer::nfc_quick_check("\xE2\x84\xAB"));            // ANGSTROM SIGN -> U+00C5
  CHECK_FALSE(Normalizer::nfc_quick_check("\xEF\xA4\x80"));            // CJK compatibility ideograph
  // Property: whenever the quick check says "already NFC", utf8proc agrees.
  const auto nfd = Normalizer::from_json({{"type", "NFD"}});
  std::mt19937 rng(5);
  const char32_t ranges[][2] = {{0x20, 0x7E},   {0xC0, 0x17F},  {0x300, 0x36F},  {0x1100, 0x11FF},
                                {0x3040, 0x30FF}, {0xAC00, 0xD7A3}, {0x4E00, 0x9FFF}, {0xF900, 0xFAFF},
                                {0x1F300, 0x1F64F}, {0x0900, 0x097F}, {0x2100, 0x214F}};
  int skipped = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string s;
    for (int i = 0, n = 1 + static_cast<int>(rng() % 6); i < n; ++i) {
      const auto& r = ranges[rng() % std::size(ranges)];
      const char32_t cp = r[0] + rng() % (r[1] - r[0] + 1);
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      ds::tok::utf8::append(s, cp);
    }
    // Also try the decomposed form, which is rarely NFC.
    std::string storage;
    const std::string decomposed(nfd.apply(s, storage));
    for (const std::string& text : {s, decomposed}) {
      if (!Normalizer::nfc_quick_check(text)) continue;
      ++skipped;
      INFO("text: " << text);
      CHECK(Normalizer::full(text, Normalizer::Form::kNFC) == text);
    }
  }
  CHECK(skipped > 1000);
}

TEST_CASE("one tokenizer encodes on many threads at once", "[tokenizer][threads]") {
  const auto& tok = ds::test::qwen3_tokenizer();
  std::vector<std::string> texts;
  std::mt19937 rng(11);
  for (int i = 0; i < 8; ++i) {
    std::string t;
    for (int w = 0; w < 400; ++w) {
      t += "word" + std::to_string(rng() % 300) + (w % 7 ? " " : ", ");
      if (w % 50 == 0) t += "\xE4\xB8\xAD\xE6\x96\x87\xE5\x88\x86\xE8\xAF\x8D ";
    }
    texts.push_back(t);
  }
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(tok.encode(t));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th)
    threads.emplace_back([&, th] {
      for (int round = 0; round < 20; ++round)
        for (std::size_t i = 0; i < texts.size(); ++i) {
          const std::size_t k = (i + static_cast<std::size_t>(th)) % texts.size();
          if (tok.encode(texts[k]) != expected[k]) ++mismatches;
        }
    });
  for (auto& t : threads) t.join();
  CHECK(mismatches == 0);
}
