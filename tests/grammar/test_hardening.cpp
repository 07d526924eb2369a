// The grammar engine against hostile constraints (issue 44): operator chains 100,000 deep in
// every front end, compile bombs, cancellation and the time limit, nested schemas compiled in
// size linear in their depth (shared sub-grammars), and the advice each refusal gives.
#include <atomic>
#include <chrono>
#include <thread>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/grammar/ebnf.h"
#include "model/grammar/json_schema.h"
#include "model/grammar/regex.h"
#include "model/tokenizer/utf8.h"
#include "tests/grammar/grammar_test_util.h"

using namespace ds;
using namespace ds::grammar;
using ds::test::edge_vocab;
using ds::test::matches;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The GrammarError of building and compiling `build()`'s grammar, or "" when it compiled.
template <class Build>
std::string refusal(Build&& build, const CompileOptions& options = {}) {
  try {
    compile(build(), edge_vocab(), options);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

Grammar regex_root(const std::string& re, RegexMode mode = RegexMode::whole_text) {
  Grammar g;
  g.set_root(g.add_rule("root", regex_expr(re, mode)));
  return g;
}

// For compiles whose test is not about time: under the sanitizers on a loaded 2-core machine
// the default 10 s limit is within reach of the larger ones.
CompileOptions untimed() {
  CompileOptions o;
  o.limits.max_time = std::chrono::seconds(300);
  return o;
}

std::string nested_objects(int depth) {
  std::string s = R"({"type":"string"})";
  for (int d = 0; d < depth; ++d)
    s = R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"},"child":)" + s +
        R"(},"required":["name","child"],"additionalProperties":false})";
  return s;
}

}  // namespace

TEST_CASE("hardening: a pattern's size is bounded, and its repeated classes are one expression", "[grammar][hardening]") {
  // Past kMaxRegexBytes a pattern is refused before it is parsed.
  const std::string big(kMaxRegexBytes + 1, 'a');
  CHECK_THAT(refusal([&] { return regex_root(big); }), Catch::Contains("more than the limit of 262144"));
  CHECK_THAT(refusal([&] { return json_schema_grammar(OrderedJson{{"type", "string"}, {"pattern", big}}); }),
             Catch::Contains("more than the limit of 262144"));
  // 16,000 copies of one negated class in a JSON string (each ~40 expression nodes when
  // written out) share one expression: the grammar holds a handful of distinct nodes, so the
  // compile refuses it by its automaton's size at once instead of walking 640,000 nodes.
  std::string classes;
  for (int i = 0; i < 16000; ++i) classes += "[^a]";
  const Grammar g = json_schema_grammar(OrderedJson{{"type", "string"}, {"pattern", classes}});
  std::unordered_set<const Expr*> distinct;
  std::vector<const Expr*> stack{g.rule(g.root()).body.get()};
  while (!stack.empty()) {
    const Expr* e = stack.back();
    stack.pop_back();
    if (!distinct.insert(e).second) continue;
    if (e->kind == Expr::Kind::rule_ref) stack.push_back(g.rule(e->rule).body.get());
    for (const ExprPtr& it : e->items) stack.push_back(it.get());
    if (e->item) stack.push_back(e->item.get());
    if (e->extra) stack.push_back(e->extra.get());
  }
  CHECK(distinct.size() < 1000);
}

TEST_CASE("hardening: reading a pattern draws on the compile's budget", "[grammar][hardening]") {
  // 20,000 distinct negated classes (~120 KB, under the size cap): each is its own expression,
  // ~0.5 s to read in a Release build and many times that under the sanitizers.
  std::string classes;
  for (char32_t c = 0x4E00; c < 0x4E00 + 20000; ++c) {
    classes += "[^";
    tok::utf8::append(classes, c);
    classes += "]";
  }
  CompileLimits limits;
  limits.max_time = std::chrono::milliseconds(50);
  {
    const CompileBudget budget(limits);
    const auto t0 = Clock::now();
    CHECK_THROWS_WITH(regex_expr(classes, RegexMode::whole_text, true, &budget),
                      Catch::Contains("took longer than the limit") && Catch::Contains("reading the constraint") &&
                          Catch::Contains("distinct character class"));
    CHECK(seconds_since(t0) < 5.0);
  }
  {  // through a schema's pattern: the error names where it is
    JsonSchemaOptions options;
    const CompileBudget budget(limits);
    options.budget = &budget;
    CHECK_THROWS_WITH(json_schema_grammar(OrderedJson{{"type", "string"}, {"pattern", classes}}, options),
                      Catch::Contains("/pattern") && Catch::Contains("reading the constraint"));
  }
  {  // the client left: the parse stops at its next check
    const std::atomic<bool> cancel{true};
    const CompileBudget budget(CompileLimits{}, &cancel);
    CHECK_THROWS_AS(regex_expr(classes, RegexMode::json_string_search, true, &budget), CompileCancelled);
  }
  // A budget with time to spare changes nothing.
  const CompileBudget roomy(limits);
  Grammar g;
  g.set_root(g.add_rule("root", regex_expr("a[^b]c", RegexMode::whole_text, true, &roomy)));
  const auto compiled = compile(g, edge_vocab());
  CHECK(matches(compiled, "axc"));
  CHECK_FALSE(matches(compiled, "abc"));
}

TEST_CASE("hardening: 100,000 chained operators are refused or collapse, never recursed on", "[grammar][hardening]") {
  const std::string chain_star(100000, '*'), chain_q(100000, '?');
  for (const std::string& chain : {chain_star, chain_q}) {
    // Regex (guided_regex, structured_outputs.regex) and a schema's pattern: ECMAScript
    // allows one quantifier per atom.
    CHECK_THAT(refusal([&] { return regex_root("a" + chain); }), Catch::Contains("quantifier cannot follow"));
    CHECK_THAT(refusal([&] {
                 return json_schema_grammar(OrderedJson{{"type", "string"}, {"pattern", "a" + chain}});
               }),
               Catch::Contains("quantifier cannot follow"));
    // GBNF allows postfix operators in a row: a chain of * ? + is one repetition.
    const auto g = compile(parse_ebnf("root ::= \"a\"" + chain), edge_vocab());
    CHECK(matches(g, "a"));
    CHECK(matches(g, "") == true);
  }
  // Counted repetitions do not collapse: the nesting limit refuses them.
  std::string counted = "root ::= \"a\"";
  for (int i = 0; i < 20000; ++i) counted += "{1,2}";
  CHECK_THAT(refusal([&] { return parse_ebnf(counted); }), Catch::Contains("nested more than"));
  // Groups 100,000 deep: the parsers' own recursion is bounded.
  CHECK_THAT(refusal([] { return regex_root(std::string(100000, '(') + "a" + std::string(100000, ')')); }),
             Catch::Contains("groups nested"));
  CHECK_THAT(refusal([] { return parse_ebnf("root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')')); }),
             Catch::Contains("parentheses nested"));
  // A chain of 20,000 rules each inlining the next.
  std::string rules = "root ::= r0\n";
  for (int i = 0; i < 20000; ++i) rules += "r" + std::to_string(i) + " ::= \"a\" r" + std::to_string(i + 1) + "\n";
  rules += "r20000 ::= \"b\"\n";
  const auto t0 = Clock::now();
  CHECK_THAT(refusal([&] { return parse_ebnf(rules); }), Catch::Contains("nested too deeply"));
  CHECK(seconds_since(t0) < 10);
  // Expressions built directly are bounded the same way.
  CHECK_THROWS_AS(
      [] {
        ExprPtr e = bytes("a");
        for (int i = 0; i < kMaxExprDepth + 10; ++i) e = seq({bytes("x"), alt({e, bytes("y")})});
        return e;
      }(),
      GrammarError);
}

TEST_CASE("hardening: compile bombs are refused within the budget, with advice that fits", "[grammar][hardening]") {
  const std::string bomb = "((a{100}){100}){100}";
  for (const std::string& pattern : {bomb, "^" + bomb + "$"}) {
    INFO(pattern);
    const auto t0 = Clock::now();
    const std::string e = refusal([&] { return json_schema_grammar(OrderedJson{{"pattern", pattern}}); });
    CHECK(seconds_since(t0) < 2);
    CHECK_THAT(e, Catch::Contains("too large"));
    CHECK_THAT(e, Catch::Contains("counted repetitions"));
  }
  // The search form within the state limit blows up at determinisation, under the memory
  // budget: the advice names searching and anchoring.
  CompileOptions small;
  small.limits.max_bytes = int64_t{8} << 20;
  const std::string searched = refusal([] { return regex_root("[ab]*a[ab]{16}"); }, small);
  CHECK_THAT(searched, Catch::Contains("determinising"));
  CHECK_THAT(searched, Catch::Contains("anchor"));
  CHECK(refusal([] { return regex_root("[ab]{0,3}a[ab]{4}"); }, small).empty());
  // Invalid schemas with huge parts are refused before anything is built.
  const auto t1 = Clock::now();
  CHECK_THAT(refusal([] {
               return json_schema_grammar(OrderedJson::parse(
                   R"({"type":"array","maxItems":10000,"items":{"type":"array","maxItems":10000,"items":{"type":"string","maxLength":10000}}})"));
             }),
             Catch::Contains("too large"));
  CHECK(seconds_since(t1) < 2);
}

TEST_CASE("hardening: the time limit and cancellation stop a compile within milliseconds", "[grammar][hardening]") {
  // Determinising a searched pattern: 131,072 states, over a second unlimited.
  auto slow = [] { return regex_root("[ab]*a[ab]{16}"); };
  CompileOptions unlimited;
  unlimited.limits.max_bytes = int64_t{4} << 30;
  unlimited.limits.max_states = 50'000'000;
  CompileOptions timed = unlimited;
  timed.limits.max_time = std::chrono::milliseconds(50);
  auto t0 = Clock::now();
  CHECK_THAT(refusal(slow, timed), Catch::Contains("took longer than the limit"));
  CHECK(seconds_since(t0) < 1.0);

  std::atomic<bool> cancel{false};
  CompileOptions cancellable = unlimited;
  cancellable.cancel = &cancel;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancel = true;
  });
  t0 = Clock::now();
  CHECK_THROWS_AS(compile(slow(), edge_vocab(), cancellable), CompileCancelled);
  stopper.join();
  CHECK(seconds_since(t0) < 1.0);
}

TEST_CASE("hardening: nested schemas compile in size linear in their depth", "[grammar][hardening]") {
  std::vector<int32_t> states;
  for (int depth : {4, 8, 16}) {
    INFO(depth);
    const auto g = compile(json_schema_grammar(OrderedJson::parse(nested_objects(depth))), edge_vocab(), untimed());
    states.push_back(g->stats().states);
    std::string value = "\"x\"";
    for (int d = 0; d < depth; ++d) value = "{\"name\":\"a\",\"child\":" + value + "}";
    CHECK(matches(g, value));
  }
  CHECK(states[2] < 2 * states[1] + 200);
  CHECK(states[1] < 2 * states[0] + 200);
  // Arrays of objects of arrays: items are shared rules once their copies would cost too much.
  const std::string item = R"({"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array",
      "items":{"type":"string","maxLength":40},"maxItems":20},"name":{"type":"string","maxLength":30}},
      "required":["id"],"additionalProperties":false})";
  const std::string schema =
      R"({"type":"object","properties":{"rows":{"type":"array","maxItems":30,"items":)" + item +
      R"(},"meta":{"type":"array","minItems":1,"maxItems":4,"items":{"type":"array","maxItems":25,"items":)" + item +
      R"(}}},"required":["rows","meta"],"additionalProperties":false})";
  const auto g = compile(json_schema_grammar(OrderedJson::parse(schema)), edge_vocab(), untimed());
  CHECK(g->stats().rules > 1);  // shared
  CHECK(matches(g, R"({"rows":[{"id":1,"tags":["a","b"]},{"id":2,"name":"n"}],"meta":[[{"id":3}],[]]})"));
  CHECK_FALSE(matches(g, R"({"rows":[{"id":1,"tags":["a","b"]}],"meta":[]})"));
  // Token masks under the shared rules agree with the brute force, step by step.
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const std::string out = test::random_walk(g, seed, 120, {0});
    INFO(out);
    GrammarMatcher replay(g, {0});
    CHECK(replay.accept_bytes(out));
  }
}

TEST_CASE("hardening: schema corner cases are refused as schema errors", "[grammar][hardening]") {
  // A oneOf whose alternative refers back to the document: the exclusiveness check is bounded.
  CHECK_THROWS_WITH(json_schema_grammar(OrderedJson::parse(R"({"oneOf":[{"anyOf":[{"$ref":"#"}]},{"type":"string"}]})")),
                    Catch::Contains("may both match"));
  OrderedJson many = OrderedJson::array();
  for (int i = 0; i < 2000; ++i) many.push_back({{"const", i}});
  CHECK_THROWS_WITH(json_schema_grammar(OrderedJson{{"oneOf", many}}), Catch::Contains("more than 1024"));
  // Keywords of the wrong type are the schema's fault, not an internal error.
  CHECK_NOTHROW(json_schema_grammar(OrderedJson::parse(R"({"type":"array","nullable":"yes","uniqueItems":3})")));
  // Schema text nested 100,000 deep (a const value, say) is refused before it is parsed.
  CHECK_THROWS_WITH(json_schema_grammar_from_text("{\"const\":" + std::string(100000, '[') + std::string(100000, ']') + "}"),
                    Catch::Contains("nests deeper than"));
  // Stray closers before the schema cannot buy depth back.
  CHECK_THROWS_WITH(json_schema_grammar_from_text(std::string(200, ']') + "{\"const\":" + std::string(kMaxSchemaTextDepth, '[') +
                                                  std::string(kMaxSchemaTextDepth, ']') + "}"),
                    Catch::Contains("nests deeper than"));
  // A chain of 300 references, each converted inside the last: bounded as nesting is.
  OrderedJson defs = OrderedJson::object();
  for (int i = 0; i < 300; ++i) defs["d" + std::to_string(i)] = {{"$ref", "#/$defs/d" + std::to_string(i + 1)}};
  defs["d300"] = {{"type", "integer"}};
  CHECK_THROWS_WITH(json_schema_grammar(OrderedJson{{"$defs", defs}, {"$ref", "#/$defs/d0"}}),
                    Catch::Contains("counting $ref hops"));
  CHECK_THROWS_AS(json_schema_grammar(OrderedJson::parse(R"({"properties":{"a":{"$ref":1}}})")), GrammarError);
  CHECK_THROWS_AS(json_schema_grammar(OrderedJson::parse(R"({"$ref":"#/a/99999999999999999999999"})")), GrammarError);
  // A 5,000-character property name beside additionalProperties (past both depth bounds, 1,000
  // and 2,048): the key expression stays shallow, and no extra key equals the declared one.
  // (The fuzz seed schema_long_key has a 20,000-character name.)
  const std::string name(5000, 'k');
  const OrderedJson schema = {{"type", "object"},
                              {"properties", {{name, {{"type", "integer"}}}}},
                              {"additionalProperties", {{"type", "integer"}}}};
  const auto g = compile(json_schema_grammar(schema), edge_vocab(), untimed());
  CHECK(matches(g, "{\"" + name + "\":1}"));
  CHECK(matches(g, R"({"other":2})"));
  // Regex messages say what is unsupported.
  CHECK_THROWS_WITH(regex_expr("(?i)abc", RegexMode::whole_text), Catch::Contains("inline modifiers"));
  CHECK_THROWS_WITH(regex_expr("a(?=b)", RegexMode::whole_text), Catch::Contains("lookaround"));
}
