// Helpers of the grammar tests: vocabularies, compiling, and a brute-force check of a
// matcher's token mask (every token tried on a copy of the matcher).
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "model/grammar/compiler.h"
#include "model/grammar/ebnf.h"
#include "model/grammar/matcher.h"
#include "model/grammar/vocabulary.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/test_paths.h"

namespace ds::test {

inline const tok::Tokenizer& grammar_tiny_tokenizer() {
  static const tok::Tokenizer t = tok::Tokenizer::load(data_path("tiny-qwen35"));
  return t;
}

// The tiny model's vocabulary (1,024 rows: 1,004 BPE tokens, 20 added, some special).
inline std::shared_ptr<const grammar::TokenVocabulary> tiny_vocab() {
  static const auto v = grammar::TokenVocabulary::from_tokenizer(grammar_tiny_tokenizer(), 1024);
  return v;
}

// A vocabulary made for grammar edge cases: every single byte, and tokens that span several
// grammar symbols (`"}`, `},{"`, `a"`, ...) or stop inside a UTF-8 character; id 0 is an end
// token (special, no text).
inline std::shared_ptr<const grammar::TokenVocabulary> edge_vocab() {
  static const auto v = [] {
    std::vector<std::string> toks{""};  // 0: end token
    for (int b = 1; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
    for (const char* s : {"\"}", "},{\"", "a\"", "\":", "\": ", ", \"", "{\"", "[{", "}]", "]}", "}}", "true", "false",
                          "null", "12", "0.", ".5", "e+", "\\n", "\\u00", "\xC3", "\xC3\xA9", "\xA9\"", "\xE2\x82",
                          "\xAC", "ab", "abc", "bc", "</", "</p", "</parameter>", "\n</", "x\n</", "  ", "\n  ",
                          "\"a\"", "\"b\"", "\"key\":", "\"name\": \"", "-1", "-0", "00", "1e5", "\"\"", "[]", "{}",
                          "[\"", "\"]", ",\n", "\n}", "hello", " world", "\xF0\x9F", "\x98\x80\""})
      toks.push_back(s);
    return std::make_shared<const grammar::TokenVocabulary>(static_cast<int32_t>(toks.size()) + 3, toks,
                                                            std::vector<int32_t>{0});
  }();
  return v;
}

inline std::shared_ptr<const grammar::CompiledGrammar> compile_ebnf(const std::string& text,
                                                                    std::shared_ptr<const grammar::TokenVocabulary> v) {
  return grammar::compile(grammar::parse_ebnf(text), std::move(v));
}

inline bool has_bit(const std::vector<uint32_t>& mask, int32_t t) { return (mask[static_cast<size_t>(t) / 32] >> (t % 32)) & 1u; }

// The mask the matcher fills must equal, token for token, what accept_token allows.
inline void check_mask(grammar::GrammarMatcher& m, const std::string& context) {
  const int32_t vocab = m.grammar().vocabulary().size();
  std::vector<uint32_t> mask(static_cast<size_t>(m.grammar().vocabulary().mask_words()), 0xDEADBEEF);
  m.fill_next_token_bitmask(mask);
  for (int32_t t = 0; t < vocab; ++t) {
    grammar::GrammarMatcher copy = m;
    const bool ok = copy.accept_token(t);
    if (ok != has_bit(mask, t)) {
      INFO(context << ": token " << t << " '" << std::string(m.grammar().vocabulary().bytes(t)) << "' accept_token="
                   << ok << " mask=" << has_bit(mask, t));
      CHECK(ok == has_bit(mask, t));
      return;
    }
  }
}

// Random walk under the grammar: checks the mask at every step against brute force, picks
// an allowed token (an end token only when nothing else is allowed or by chance), returns the
// bytes generated. Fails the test when the mask is empty.
inline std::string random_walk(const std::shared_ptr<const grammar::CompiledGrammar>& g, uint64_t seed, int steps,
                               std::vector<int32_t> end_tokens = {0}, bool check = true) {
  grammar::GrammarMatcher m(g, end_tokens);
  std::mt19937_64 rng(seed);
  std::string out;
  std::vector<uint32_t> mask(static_cast<size_t>(g->vocabulary().mask_words()));
  for (int i = 0; i < steps && !m.is_finished(); ++i) {
    if (check) check_mask(m, "step " + std::to_string(i) + " after '" + out + "'");
    m.fill_next_token_bitmask(mask);
    std::vector<int32_t> allowed, text;
    for (int32_t t = 0; t < g->vocabulary().size(); ++t)
      if (has_bit(mask, t)) (std::find(end_tokens.begin(), end_tokens.end(), t) != end_tokens.end() ? allowed : text).push_back(t);
    REQUIRE(!(allowed.empty() && text.empty()));
    int32_t pick;
    if (!text.empty() && (allowed.empty() || rng() % 8 != 0))
      pick = text[rng() % text.size()];
    else
      pick = allowed[rng() % allowed.size()];
    REQUIRE(m.accept_token(pick));
    if (g->vocabulary().is_text(pick)) out += std::string(g->vocabulary().bytes(pick));
  }
  return out;
}

// Whether the grammar accepts exactly `text` (read as raw bytes, then able to end).
inline bool matches(const std::shared_ptr<const grammar::CompiledGrammar>& g, const std::string& text) {
  grammar::GrammarMatcher m(g, {0});
  if (!text.empty() && !m.accept_bytes(text)) return false;
  return m.can_end();
}

}  // namespace ds::test
