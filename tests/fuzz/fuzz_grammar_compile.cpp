// Fuzz target: a client's structured-output constraint -> the grammar engine (model/grammar/):
// the first byte picks the front end (a regex matched whole, a JSON Schema's pattern searched
// inside a string, a GBNF grammar, a JSON Schema document), the rest is its text. A grammar
// that builds is compiled against a small vocabulary of single bytes and multi-symbol tokens
// under a small budget (states, memory, time: every limit is reachable), and a matcher then
// walks it for a few tokens, checking that each token its mask allows is accepted.
// Invariants: bad input is a GrammarError (a 400 for the client) or nothing; any other
// exception escapes and is reported as a crash, as are stack overflows (deep recursion) and
// sanitizer findings. tests/fuzz/corpus/grammar_compile holds the operator chains, compile
// bombs and nested schemas of issue 44 as seeds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/grammar/compiler.h"
#include "model/grammar/ebnf.h"
#include "model/grammar/json_schema.h"
#include "model/grammar/matcher.h"
#include "model/grammar/regex.h"

using namespace ds::grammar;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

std::shared_ptr<const TokenVocabulary> vocab() {
  static const auto v = [] {
    std::vector<std::string> toks{""};  // 0: the end token
    for (int b = 1; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
    for (const char* s : {"\"}", "},{\"", "\":", "{\"", "[{", "}]", "true", "null", "12", "ab", "abc", "aa", "aaaa",
                          "\\u00", "\xC3\xA9", "</", "\n</", "<think>", "</think>", "  ", "\n  "})
      toks.push_back(s);
    return std::make_shared<const TokenVocabulary>(static_cast<int32_t>(toks.size()) + 2, toks,
                                                   std::vector<int32_t>{0});
  }();
  return v;
}

// As the server's compile workers do (grammar_cache.cpp): reading the constraint draws on the
// budget that the compile then goes on with.
Grammar build(uint8_t kind, std::string_view text, const CompileBudget& budget) {
  JsonSchemaOptions options;
  options.budget = &budget;
  switch (kind % 4) {
    case 0: {
      Grammar g;
      g.set_root(g.add_rule("root", regex_expr(text, RegexMode::whole_text, true, &budget)));
      return g;
    }
    case 1: return json_schema_grammar(OrderedJson{{"type", "string"}, {"pattern", std::string(text)}}, options);
    case 2: return parse_ebnf(text);
    default: return json_schema_grammar_from_text(text, options);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  CompileOptions options;
  options.threads = 1;
  options.limits.max_states = 20000;
  options.limits.max_bytes = int64_t{64} << 20;
  options.limits.max_time = std::chrono::milliseconds(2000);
  options.limits.max_masks = 2048;
  std::shared_ptr<const CompiledGrammar> g;
  try {
    CompileBudget budget(options.limits);
    g = compile(build(data[0], text, budget), vocab(), options, budget);
  } catch (const GrammarError&) {
    return 0;
  }
  // A short walk: the first allowed text token (rotating by the input's length), or the end.
  GrammarMatcher m(g, {0});
  std::vector<uint32_t> mask(static_cast<size_t>(g->vocabulary().mask_words()));
  for (size_t step = 0; step < 8 && !m.is_finished(); ++step) {
    m.fill_next_token_bitmask(mask);
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < g->vocabulary().size(); ++t)
      if ((mask[static_cast<size_t>(t) / 32] >> (t % 32)) & 1u) allowed.push_back(t);
    if (allowed.empty()) break;
    const int32_t pick = allowed[(size + step) % allowed.size()];
    check(m.accept_token(pick));
  }
  return 0;
}
