// bench_grammar: what structured output costs on the host, per schema, at a real vocabulary
// size (docs/bench-log, "Structured outputs").
//
// The vocabulary is a real tokenizer's (default: the bundled Qwen3 one, 151,669 tokens)
// extended to --vocab-size (default 248,320, Qwen3.5's) with synthetic tokens, each the bytes
// of two random real tokens joined, so the extra tokens look like BPE merges. For seven
// schemas (five of increasing complexity, then two nested ones: 14 objects deep, and a
// tool's three levels of objects and arrays) it prints the compile time (automaton, then masks) and,
// over a walk of --steps tokens under the grammar, the time to fill one sequence's token
// bitmask and to accept the token (p50, p99, max). The walk picks allowed tokens at random,
// half the time among those holding a JSON structure character (so strings, arrays and
// objects close, as a model's would), and restarts when the value is complete. The last
// token id is the end token (it is a synthetic one: the vocabulary's own special tokens are
// never text).
// The floor printed first is the memory traffic every mask fill pays at this vocabulary:
// zeroing the bitmask and OR-ing one precomputed bitmask into it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "model/grammar/compiler.h"
#include "model/grammar/json_schema.h"
#include "model/grammar/matcher.h"
#include "model/grammar/vocabulary.h"
#include "model/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using ds::grammar::CompiledGrammar;
using ds::grammar::GrammarMatcher;
using ds::grammar::TokenVocabulary;

double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

struct Schema {
  const char* name;
  const char* text;  // nullptr: json_object
};

const Schema kSchemas[] = {
    {"1 answer", R"({"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],
      "additionalProperties":false})"},
    {"2 tool args", R"({"type":"object","properties":{
      "location":{"type":"string","description":"City and country"},
      "unit":{"type":"string","enum":["celsius","fahrenheit"]},
      "days":{"type":"integer","minimum":1,"maximum":14},
      "include_hourly":{"type":"boolean"}},
      "required":["location","unit","days","include_hourly"],"additionalProperties":false})"},
    {"3 record", R"({"type":"object","properties":{
      "id":{"type":"string","format":"uuid"},
      "name":{"type":"string","minLength":1,"maxLength":64},
      "email":{"type":"string","format":"email"},
      "born":{"type":"string","format":"date"},
      "score":{"type":"number","minimum":0,"maximum":100},
      "tags":{"type":"array","items":{"type":"string","maxLength":16},"maxItems":8},
      "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
        "zip":{"type":"string","pattern":"^[0-9]{5}$"},"country":{"enum":["US","CA","MX"]}},
        "required":["street","city","country"],"additionalProperties":false},
      "status":{"anyOf":[{"type":"null"},{"enum":["active","suspended"]}]},
      "notes":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}},
      "required":["id","name","email","address","status"],"additionalProperties":false})"},
    {"4 json_object", nullptr},
    {"5 recursive", R"({"$defs":{"node":{"type":"object","properties":{
      "kind":{"enum":["file","dir"]},"name":{"type":"string","pattern":"^[a-zA-Z0-9_.-]{1,32}$"},
      "size":{"type":"integer","minimum":0},"meta":{"type":"object","additionalProperties":{"type":["string","number"]}},
      "children":{"type":"array","items":{"$ref":"#/$defs/node"}},
      "link":{"oneOf":[{"type":"null"},{"$ref":"#/$defs/node"}]}},
      "required":["kind","name"],"additionalProperties":false}},
      "type":"object","properties":{"root":{"$ref":"#/$defs/node"},"version":{"type":"integer"}},
      "required":["root"],"additionalProperties":false})"},
    // Nesting (issue 44): compile time linear in the schema, not doubling per level.
    {"6 nested 14", R"({"type":"object","properties":{"n":{"type":"object","properties":{"n":{"type":"object",
      "properties":{"n":{"type":"object","properties":{"n":{"type":"object","properties":{"n":{"type":"object",
      "properties":{"n":{"type":"object","properties":{"n":{"type":"object","properties":{"n":{"type":"object",
      "properties":{"n":{"type":"object","properties":{"n":{"type":"object","properties":{"n":{"type":"object",
      "properties":{"n":{"type":"object","properties":{"n":{"type":"object","properties":{"v":{"type":"string"}},
      "required":["v"]}},"required":["n"]}},"required":["n"]}},"required":["n"]}},"required":["n"]}},"required":["n"]}},
      "required":["n"]}},"required":["n"]}},"required":["n"]}},"required":["n"]}},"required":["n"]}},"required":["n"]}},
      "required":["n"]}},"required":["n"]})"},
    {"7 tool 3-level", R"({"type":"object","properties":{
      "query":{"type":"string","description":"What to search for"},
      "filters":{"type":"object","properties":{
        "date":{"type":"object","properties":{"from":{"type":"string","format":"date"},"to":{"type":"string","format":"date"}}},
        "authors":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string","maxLength":64},
          "affiliation":{"type":"string"},"orcid":{"type":"string","pattern":"^[0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{3}[0-9X]$"}},
          "required":["name"],"additionalProperties":false},"maxItems":10},
        "venues":{"type":"array","items":{"type":"string","enum":["journal","conference","preprint","book"]}},
        "citations":{"type":"object","properties":{"min":{"type":"integer","minimum":0},"max":{"type":"integer","minimum":0}}}},
        "additionalProperties":false},
      "sort":{"type":"array","items":{"type":"object","properties":{"field":{"enum":["date","citations","relevance"]},
        "order":{"enum":["asc","desc"]}},"required":["field"],"additionalProperties":false},"maxItems":3},
      "page":{"type":"object","properties":{"size":{"type":"integer","minimum":1,"maximum":100},
        "cursor":{"type":["string","null"]}},"additionalProperties":false}},
      "required":["query"],"additionalProperties":false})"},
};

std::shared_ptr<const TokenVocabulary> build_vocab(const std::string& tokenizer_path, int32_t size, uint64_t seed,
                                                   int32_t& real_tokens) {
  const ds::tok::Tokenizer tok = ds::tok::Tokenizer::load(tokenizer_path);
  real_tokens = tok.vocab_size();
  std::vector<std::string> bytes(static_cast<size_t>(std::max(size, real_tokens)));
  std::vector<int32_t> special, text_ids;
  for (int32_t i = 0; i < real_tokens; ++i) {
    bytes[static_cast<size_t>(i)] = std::string(tok.token_bytes(i));
    if (tok.is_special(i)) special.push_back(i);
    else if (!bytes[static_cast<size_t>(i)].empty()) text_ids.push_back(i);
  }
  std::mt19937_64 rng(seed);
  for (int32_t i = real_tokens; i < size; ++i)
    bytes[static_cast<size_t>(i)] = bytes[static_cast<size_t>(text_ids[rng() % text_ids.size()])] +
                                    bytes[static_cast<size_t>(text_ids[rng() % text_ids.size()])];
  return std::make_shared<const TokenVocabulary>(std::max(size, real_tokens), std::move(bytes), special);
}

struct Stats {
  std::vector<double> v;
  double pct(double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
  }
  double max() { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
};

bool structural(std::string_view b) {
  return b.find_first_of("\"{}[],:") != std::string_view::npos;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Structured-output grammar engine: compile time and per-token mask time per schema"};
  std::string tokenizer = DS_QWEN3_TOKENIZER_JSON;
  int32_t vocab_size = 248320;
  int32_t steps = 3000;
  uint64_t seed = 1;
  app.add_option("--tokenizer", tokenizer, "tokenizer.json or model directory whose tokens start the vocabulary");
  app.add_option("--vocab-size", vocab_size, "vocabulary size (synthetic tokens past the tokenizer's)")->check(CLI::Range(1, 1 << 22));
  app.add_option("--steps", steps, "tokens generated under each schema")->check(CLI::Range(1, 10000000));
  app.add_option("--seed", seed, "walk and synthetic-vocabulary seed");
  CLI11_PARSE(app, argc, argv);

  int32_t real = 0;
  const auto t_vocab = Clock::now();
  const auto vocab = build_vocab(tokenizer, vocab_size, seed, real);
  std::printf("vocabulary: %d tokens (%d from %s, %d synthetic), trie %d nodes, built in %.0f ms\n", vocab->size(), real,
              tokenizer.c_str(), vocab->size() - real, vocab->trie().size(), us_since(t_vocab) / 1000);

  // The floor: zero one bitmask and OR one precomputed bitmask into it.
  {
    std::vector<uint32_t> mask(static_cast<size_t>(vocab->mask_words())), other(mask.size(), 0x5A5A5A5Au);
    Stats floor;
    for (int i = 0; i < 2000; ++i) {
      const auto t = Clock::now();
      std::fill(mask.begin(), mask.end(), 0u);
      for (size_t w = 0; w < mask.size(); ++w) mask[w] |= other[w];
      floor.v.push_back(us_since(t));
      other[static_cast<size_t>(i) % other.size()] ^= mask[0];
    }
    std::printf("floor (zero + OR one %d-word bitmask): p50 %.2f us\n\n", vocab->mask_words(), floor.pct(0.5));
  }

  const std::vector<int32_t> end_tokens{vocab->size() - 1};
  std::vector<int32_t> structural_ids, all_ids;
  for (int32_t t = 0; t < vocab->size(); ++t) {
    if (!vocab->is_text(t)) continue;
    all_ids.push_back(t);
    if (structural(vocab->bytes(t))) structural_ids.push_back(t);
  }
  std::printf("%-14s %9s %9s %9s %7s %6s %7s %7s | %9s %9s %9s | %9s %9s | %6s %5s\n", "schema", "build_ms", "pda_ms",
              "masks_ms", "states", "masks", "mask_MB", "escapes", "fill_p50", "fill_p99", "fill_max", "accept_p50", "accept_p99",
              "tokens", "done");
  for (const Schema& s : kSchemas) {
    const auto t0 = Clock::now();
    const ds::grammar::Grammar g =
        s.text ? ds::grammar::json_schema_grammar_from_text(s.text) : ds::grammar::json_object_grammar();
    // What a compile costs, measured whole: not cut short by serve's default budget.
    ds::grammar::CompileOptions options;
    options.limits.max_time = std::chrono::minutes(30);
    options.limits.max_bytes = int64_t{16} << 30;
    const auto compiled = ds::grammar::compile(g, vocab, options);
    const double build_ms = us_since(t0) / 1000 - (compiled->stats().pda_seconds + compiled->stats().mask_seconds) * 1000;
    const ds::grammar::CompileStats& st = compiled->stats();

    std::mt19937_64 rng(seed);
    Stats fill, accept;
    std::vector<uint32_t> mask(static_cast<size_t>(vocab->mask_words()));
    std::vector<int32_t> allowed;
    int completed = 0;
    auto matcher = std::make_unique<GrammarMatcher>(compiled, end_tokens);
    auto is_allowed = [&](int32_t t) { return t != end_tokens[0] && ((mask[static_cast<size_t>(t) / 32] >> (t % 32)) & 1u); };
    for (int32_t i = 0; i < steps; ++i) {
      if (matcher->must_end()) {
        ++completed;
        matcher = std::make_unique<GrammarMatcher>(compiled, end_tokens);
      }
      auto t = Clock::now();
      matcher->fill_next_token_bitmask(mask);
      fill.v.push_back(us_since(t));
      // Pick by rejection sampling (a scan of the whole mask would evict the grammar's data
      // from the caches between steps, which no engine does): half the time among tokens with
      // a structure character, else among all; a full scan only when both find nothing.
      int32_t tok = -1;
      const std::vector<int32_t>& first = rng() % 2 == 0 ? structural_ids : all_ids;
      for (int k = 0; k < 256 && tok < 0; ++k) {
        const int32_t c = first[rng() % first.size()];
        if (is_allowed(c)) tok = c;
      }
      for (int k = 0; k < 256 && tok < 0; ++k) {
        const int32_t c = structural_ids[rng() % structural_ids.size()];
        if (is_allowed(c)) tok = c;
      }
      if (tok < 0) {
        allowed.clear();
        for (int32_t c = 0; c < vocab->size(); ++c)
          if (is_allowed(c)) allowed.push_back(c);
        if (allowed.empty()) {
          ++completed;
          matcher = std::make_unique<GrammarMatcher>(compiled, end_tokens);
          continue;
        }
        tok = allowed[rng() % allowed.size()];
      }
      t = Clock::now();
      const bool ok = matcher->accept_token(tok);
      accept.v.push_back(us_since(t));
      if (!ok) {
        std::fprintf(stderr, "%s: the matcher refused token %d it allowed\n", s.name, tok);
        return 1;
      }
    }
    std::printf("%-14s %9.1f %9.1f %9.1f %7d %6d %7.1f %7lld | %9.1f %9.1f %9.1f | %9.1f %9.1f | %6d %5d\n", s.name,
                build_ms, st.pda_seconds * 1000, st.mask_seconds * 1000, st.states, st.masks,
                static_cast<double>(st.mask_bytes) / (1 << 20), static_cast<long long>(st.escape_nodes), fill.pct(0.5),
                fill.pct(0.99), fill.max(), accept.pct(0.5), accept.pct(0.99), steps, completed);
  }
  std::printf("\nbuild = schema to grammar, pda = automaton, masks = token masks (%u threads); fill/accept in\n"
              "microseconds per token for one sequence; done = values completed during the walk\n",
              std::min(16u, std::max(1u, std::thread::hardware_concurrency())));
  return 0;
}
