// The grammar engine on its own: EBNF front end, compilation to the pushdown automaton, the
// matcher's token masks (checked token by token against accept_token on copies), rollback,
// end tokens, and the errors grammars are refused with.
#include <set>

#include "model/grammar/utf8_class.h"
#include "model/tokenizer/utf8.h"
#include "tests/grammar/grammar_test_util.h"

using namespace ds;
using namespace ds::grammar;
using ds::test::compile_ebnf;
using ds::test::edge_vocab;
using ds::test::matches;
using ds::test::tiny_vocab;

namespace {

const char* kJsonEbnf = R"(
root   ::= value
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )?
ws     ::= [ \n]*
)";

}  // namespace

TEST_CASE("EBNF grammars accept exactly their language", "[grammar]") {
  const auto g = compile_ebnf(kJsonEbnf, edge_vocab());
  for (const char* ok : {"{}", "[]", "{\"a\": [1, 2.5, -3]}", "\"x\"", "null", "[{\"k\":{}} , true]", "\"\xC3\xA9\"",
                         "{ \"a\" : \"b\\n\" }"})
    CHECK(matches(g, ok));
  for (const char* bad : {"{", "[1,]", "01", "\"\\x\"", "{\"a\"}", "tru", "nul l", "[1 2]", "\"\xC3\"", "-"})
    CHECK_FALSE(matches(g, bad));
}

TEST_CASE("EBNF syntax: repetition, classes, escapes, comments, multi-line rules", "[grammar]") {
  const auto g = compile_ebnf(R"(
    # a comment
    root ::= "id-" [a-z]{2,3} digits
             ( "!" | '?' )?   # continues on the next line
    digits ::= [0-9]+
  )",
                              edge_vocab());
  CHECK(matches(g, "id-ab1"));
  CHECK(matches(g, "id-abc123?"));
  CHECK(matches(g, "id-xy0!"));
  CHECK_FALSE(matches(g, "id-a1"));
  CHECK_FALSE(matches(g, "id-abcd1"));
  CHECK_FALSE(matches(g, "id-ab"));
  const auto u = compile_ebnf(R"(root ::= "\u00e9" [\x41-\x43] . [^a])", edge_vocab());
  CHECK(matches(u, "\xC3\xA9" "B\xE2\x82\xAC" "b"));
  CHECK(matches(u, "\xC3\xA9" "Cz\xF0\x9F\x98\x80"));
  CHECK_FALSE(matches(u, "\xC3\xA9" "Dza"));
  CHECK_FALSE(matches(u, "\xC3\xA9" "Cza"));
}

TEST_CASE("grammar errors name what is wrong", "[grammar]") {
  auto err = [](const std::string& text) {
    try {
      compile_ebnf(text, edge_vocab());
    } catch (const GrammarError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(err("root ::= foo"), Catch::Contains("'foo' is used but not defined"));
  CHECK_THAT(err("root ::= root \"a\" | \"b\""), Catch::Contains("left-recursive"));
  CHECK_THAT(err("root ::= x\nx ::= \"a\"? x \"b\" | \"c\""), Catch::Contains("left-recursive"));
  CHECK_THAT(err("root ::= \"a\" x\nx ::= \"b\" x"), Catch::Contains("matches nothing"));
  CHECK_THAT(err("root ::= \"a\n"), Catch::Contains("unterminated"));
  CHECK_THAT(err("root ::= [b-a]"), Catch::Contains("out of order"));
  CHECK_THAT(err("start ::= \"a\""), Catch::Contains("no rule named 'root'"));
  CHECK_THAT(err("root ::= \"a\"{3,1}"), Catch::Contains("empty"));
  CHECK_THAT(err("root ::= \"a\"\nroot ::= \"b\""), Catch::Contains("defined twice"));
  CHECK_THAT(err("root ::= \"a\" )"), Catch::Contains("line 1"));
}

TEST_CASE("code point classes compile to exactly their UTF-8 encodings", "[grammar]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 6; ++round) {
    CodepointSet set;
    for (int k = 0; k < 5; ++k) {
      const char32_t lo = rng() % (round % 2 ? 0x11000u : 0x900u);
      set.add(lo, lo + rng() % 0x300);
    }
    if (round == 5) set = set.complement();
    Grammar gr;
    gr.set_root(gr.add_rule("root", utf8_expr(set)));
    const auto g = compile(gr, edge_vocab());
    std::vector<char32_t> probes{0, 0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF, 0xD7FF, 0xE000};
    for (const auto& r : set.ranges()) {
      for (char32_t d : {0u, 1u}) {
        probes.push_back(r.lo - d);
        probes.push_back(r.hi + d);
      }
    }
    for (int k = 0; k < 300; ++k) probes.push_back(rng() % 0x110000);
    for (char32_t cp : probes) {
      if (cp > kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF)) continue;
      std::string enc;
      tok::utf8::append(enc, cp);
      INFO("code point " << static_cast<uint32_t>(cp));
      CHECK(matches(g, enc) == set.contains(cp));
    }
    // Surrogates and overlong forms never match.
    CHECK_FALSE(matches(g, "\xED\xA0\x80"));
    CHECK_FALSE(matches(g, "\xC0\x80"));
  }
}

TEST_CASE("token masks equal brute force along random walks", "[grammar]") {
  const std::vector<std::string> grammars = {
      kJsonEbnf,
      // Nullable rules, recursion through several rules, calls whose callee may be empty.
      "root ::= a b\na ::= \"x\" a? \"y\" | \"\"\nb ::= (\"[\" b \"]\")* c\nc ::= [0-9]*",
      // Tokens that must leave a rule and continue in the caller: "a\"" and "\":".
      "root ::= item (\",\" item)*\nitem ::= \"\\\"\" [a-c]* \"\\\"\" \":\" (\"{\" root? \"}\" | \"1\")",
      // Multi-byte characters split across tokens.
      "root ::= [\\u00e9\\u20ac\\U0001F600a]{1,8} \"\\\"\"",
  };
  for (size_t gi = 0; gi < grammars.size(); ++gi) {
    for (const auto& vocab : {edge_vocab(), tiny_vocab()}) {
      const auto g = compile_ebnf(grammars[gi], vocab);
      for (uint64_t seed = 1; seed <= 4; ++seed) {
        INFO("grammar " << gi << " seed " << seed);
        test::random_walk(g, seed * 131 + gi, 40, {0});
      }
    }
  }
}

TEST_CASE("text_until reads any text up to the first terminator", "[grammar]") {
  Grammar gr;
  gr.set_root(gr.add_rule("root", seq({bytes("<p>"), text_until("\n</parameter>"), bytes("!")})));
  const auto g = compile(gr, edge_vocab());
  CHECK(matches(g, "<p>hello\n</parameter>!"));
  CHECK(matches(g, "<p>\n</parameter>!"));
  CHECK(matches(g, "<p>a\n</par\n</parameter>!"));
  CHECK(matches(g, "<p>\xC3\xA9\n</parameter>!"));
  CHECK_FALSE(matches(g, "<p>a\n</parameter>b\n</parameter>!"));
  CHECK_FALSE(matches(g, "<p>\xC3\n</parameter>!"));
  for (uint64_t seed = 1; seed <= 4; ++seed) test::random_walk(g, seed, 30, {0});

  // Forbidden strings, one of them a suffix of the terminator.
  Grammar gf;
  gf.set_root(gf.add_rule("root", seq({text_until("\n</parameter>", {"</parameter>", "<parameter=", "ab"}), bytes("!")})));
  const auto f = compile(gf, edge_vocab());
  CHECK(matches(f, "x\n</parameter>!"));
  CHECK(matches(f, "a b</param\n</parameter>!"));
  CHECK_FALSE(matches(f, "x</parameter>\n</parameter>!"));
  CHECK_FALSE(matches(f, "<parameter=k\n</parameter>!"));
  CHECK_FALSE(matches(f, "cab\n</parameter>!"));
  for (uint64_t seed = 1; seed <= 4; ++seed) test::random_walk(f, seed, 30, {0});
}

TEST_CASE("members: declared order, required ones present, separators between", "[grammar]") {
  Grammar gr;
  gr.set_root(gr.add_rule("root", seq({bytes("{"), members({bytes("a"), bytes("b"), bytes("c")}, {false, true, false},
                                                          bytes(","), bytes("x")),
                                       bytes("}")})));
  const auto g = compile(gr, edge_vocab());
  for (const char* ok : {"{b}", "{a,b}", "{b,c}", "{a,b,c}", "{b,x}", "{a,b,c,x,x}"}) CHECK(matches(g, ok));
  for (const char* bad : {"{}", "{a}", "{b,a}", "{,b}", "{b,}", "{ab}", "{x,b}", "{a,c}"}) CHECK_FALSE(matches(g, bad));
}

TEST_CASE("end tokens are allowed exactly when the grammar can end", "[grammar]") {
  const auto g = compile_ebnf("root ::= \"ab\" \"c\"?", edge_vocab());
  GrammarMatcher m(g, {0});
  std::vector<uint32_t> mask(static_cast<size_t>(edge_vocab()->mask_words()));
  auto allowed = [&](int32_t t) {
    m.fill_next_token_bitmask(mask);
    return test::has_bit(mask, t);
  };
  const int32_t a = 'a', b = 'b', c = 'c';
  CHECK_FALSE(allowed(0));
  CHECK_FALSE(m.accept_token(0));
  REQUIRE(m.accept_token(a));
  CHECK_FALSE(allowed(0));
  REQUIRE(m.accept_token(b));
  CHECK(m.can_end());
  CHECK(allowed(0));
  CHECK(allowed(c));
  REQUIRE(m.accept_token(c));
  CHECK(m.must_end());
  m.fill_next_token_bitmask(mask);
  for (int32_t t = 1; t < edge_vocab()->size(); ++t) CHECK_FALSE(test::has_bit(mask, t));
  REQUIRE(m.accept_token(0));
  CHECK(m.is_finished());
  CHECK(allowed(0));  // ignore_eos keeps generating end tokens
  CHECK_FALSE(m.accept_token(a));
  // Padding rows beyond the tokenizer and special tokens are never allowed.
  m.rollback(3);
  CHECK(m.num_tokens() == 1);
  m.fill_next_token_bitmask(mask);
  for (int32_t t = edge_vocab()->size() - 3; t < edge_vocab()->size(); ++t) CHECK_FALSE(test::has_bit(mask, t));
}

TEST_CASE("rollback restores the exact earlier state", "[grammar]") {
  const auto g = compile_ebnf(kJsonEbnf, edge_vocab());
  GrammarMatcher m(g, {0});
  std::vector<uint32_t> before(static_cast<size_t>(edge_vocab()->mask_words())), after(before.size());
  REQUIRE(m.accept_bytes("{\"a\": ["));
  m.fill_next_token_bitmask(before);
  std::mt19937_64 rng(3);
  for (int round = 0; round < 20; ++round) {
    int n = 0;
    std::vector<uint32_t> mask(before.size());
    for (int k = 0; k < 1 + static_cast<int>(rng() % 6); ++k) {
      m.fill_next_token_bitmask(mask);
      std::vector<int32_t> ok;
      for (int32_t t = 1; t < edge_vocab()->size(); ++t)
        if (test::has_bit(mask, t)) ok.push_back(t);
      if (ok.empty()) break;
      REQUIRE(m.accept_token(ok[rng() % ok.size()]));
      ++n;
    }
    m.rollback(n);
    m.fill_next_token_bitmask(after);
    CHECK(after == before);
  }
  CHECK_THROWS_AS(m.rollback(5), GrammarError);
}

TEST_CASE("rejected tokens leave the matcher unchanged", "[grammar]") {
  const auto g = compile_ebnf(kJsonEbnf, edge_vocab());
  GrammarMatcher m(g, {0});
  REQUIRE(m.accept_bytes("[1"));
  CHECK_FALSE(m.accept_bytes("]x"));
  CHECK_FALSE(m.accept_token(static_cast<int32_t>('}')));
  CHECK(m.num_tokens() == 1);
  CHECK(m.accept_bytes("]"));
  CHECK(m.can_end());
}

TEST_CASE("states that behave alike for a token's length share one mask", "[grammar]") {
  // 600 characters in one counted repetition: a mask per count would be 600 masks.
  const auto g = compile_ebnf("root ::= \"\\\"\" [a-z]{0,600} \"\\\"\"", tiny_vocab());
  CHECK(g->stats().reading_states > 600);
  CHECK(g->stats().masks < 2 * tiny_vocab()->trie().max_depth + 10);
  test::random_walk(g, 5, 30, {0});
  // And the shared masks are still right near the end of the count.
  GrammarMatcher m(g, {0});
  REQUIRE(m.accept_bytes("\"" + std::string(598, 'x')));
  test::check_mask(m, "two characters left");
}
