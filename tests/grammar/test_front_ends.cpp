// The front ends: regexes, JSON Schema (values it must accept and reject, and the errors it
// refuses unsupported schemas with), integer and number ranges, json_object.
#include <random>

#include <nlohmann/json.hpp>

#include "model/grammar/ebnf.h"
#include "model/grammar/json_schema.h"
#include "model/grammar/regex.h"
#include "tests/grammar/grammar_test_util.h"

using namespace ds;
using namespace ds::grammar;
using ds::test::edge_vocab;
using ds::test::matches;

namespace {

std::shared_ptr<const CompiledGrammar> regex_grammar(const std::string& re) {
  Grammar g;
  g.set_root(g.add_rule("root", regex_expr(re, RegexMode::whole_text)));
  return compile(g, edge_vocab());
}

std::shared_ptr<const CompiledGrammar> schema_grammar(const std::string& schema) {
  return compile(json_schema_grammar_from_text(schema), edge_vocab());
}

std::string schema_error(const std::string& schema) {
  try {
    schema_grammar(schema);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("regexes match whole texts", "[grammar][regex]") {
  struct Case {
    const char* re;
    std::vector<const char*> ok, bad;
  };
  const std::vector<Case> cases = {
      {"ab|c+", {"ab", "c", "ccc"}, {"", "abc", "a"}},
      {"^[a-f0-9]{2,4}$", {"ab", "09af"}, {"a", "abcde", "AB"}},
      {"\\d{3}-\\d{4}", {"555-1234"}, {"5551234", "55-1234"}},
      {"(?:x|y)*z?", {"", "xyx", "z", "yyz"}, {"zz", "a"}},
      {"(?<year>\\d{4})-[^\\n]{1,2}", {"2024-ab", "1999-\xC3\xA9"}, {"2024-\n"}},
      {"\\w+@\\w+\\.com", {"a_b@x1.com"}, {"a@b.org", "@x.com"}},
      {"a.c", {"abc", "a\xE2\x82\xAC" "c"}, {"a\nc", "ac"}},
      {"[\\s]x", {" x", "\tx"}, {"yx"}},
      {"a{2}b{1,}c{0,1}", {"aab", "aabbc"}, {"ab", "aac"}},
      {"\\u0041\\x42\\.[\\]\\-]", {"AB.]", "AB.-"}, {"AB.x"}},
      {"x{,2}", {"x{,2}"}, {"xx"}},  // not a quantifier: literal braces
  };
  for (const Case& c : cases) {
    const auto g = regex_grammar(c.re);
    for (const char* s : c.ok) {
      INFO(c.re << " on '" << s << "'");
      CHECK(matches(g, s));
    }
    for (const char* s : c.bad) {
      INFO(c.re << " on '" << s << "'");
      CHECK_FALSE(matches(g, s));
    }
  }
}

TEST_CASE("regex features outside the regular subset are refused", "[grammar][regex]") {
  for (const char* re : {"(a)\\1", "a(?=b)", "\\bword", "\\p{L}", "a^b", "(ab", "ab)", "[a-", "*a", "x{3,1}"}) {
    INFO(re);
    CHECK_THROWS_AS(regex_expr(re, RegexMode::whole_text), GrammarError);
  }
}

TEST_CASE("JSON Schema: values accepted and rejected", "[grammar][json_schema]") {
  struct Case {
    const char* schema;
    std::vector<const char*> ok, bad;
  };
  const std::vector<Case> cases = {
      {R"({"type":"integer","minimum":-12,"maximum":305})", {"-12", "0", "305", "99", "-1"}, {"-13", "306", "1.5", "007", "-0"}},
      {R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10})", {"1", "9"}, {"0", "10"}},
      {R"({"type":"integer","minimum":5,"exclusiveMinimum":true})", {"6", "123456"}, {"5", "4"}},
      {R"({"type":"number","minimum":-1.5,"maximum":2})", {"-1", "0.25", "1.999", "2", "-0.5"}, {"2.5", "-2", "1e1"}},
      {R"({"type":"number"})", {"0", "-1.25e-3", "1E+2", "12345"}, {"+1", ".5", "1.", "01"}},
      {R"({"type":"string","minLength":2,"maxLength":3})", {"\"ab\"", "\"\xC3\xA9\xC3\xA9\"", "\"a\\nb\""}, {"\"a\"", "\"abcd\""}},
      {R"({"type":"string","pattern":"^[a-z]+\\d$"})", {"\"abc1\""}, {"\"abc\"", "\"Abc1\"", "\"abc12\""}},
      {R"({"type":"string","pattern":"b+"})", {"\"abbc\"", "\"b\"", "\"x\\\"b\""}, {"\"ac\""}},
      {R"({"type":"string","pattern":"^\"q\\\\$"})", {"\"\\\"q\\\\\""}, {"\"q\""}},
      {R"({"type":"string","format":"date"})", {"\"2024-02-28\"", "\"1999-12-31\""}, {"\"2024-02-30\"", "\"2024-13-01\""}},
      {R"({"type":"string","format":"date-time"})", {"\"2024-01-02T03:04:05Z\"", "\"2024-01-02T03:04:05.123+02:00\""},
       {"\"2024-01-02 03:04:05Z\""}},
      {R"({"type":"string","format":"uuid"})", {"\"123e4567-e89b-12d3-a456-426614174000\""}, {"\"123e4567\""}},
      {R"({"type":"string","format":"ipv4"})", {"\"192.168.0.255\""}, {"\"256.1.1.1\""}},
      {R"({"enum":["red",1,null,{"a":[true]}]})", {"\"red\"", "1", "null", "{\"a\":[true]}"}, {"\"blue\"", "2"}},
      {R"({"const":"x\ny"})", {"\"x\\ny\""}, {"\"x\""}},
      {R"({"type":["string","null"]})", {"\"s\"", "null"}, {"1"}},
      {R"({"type":"boolean"})", {"true", "false"}, {"null"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"]})",
       {"{\"b\":\"x\"}", "{\"a\": 1, \"b\": \"x\"}", "{ \"b\" : \"\" }"},
       {"{}", "{\"a\":1}", "{\"b\":\"x\",\"a\":1}", "{\"b\":1}", "{\"b\":\"x\",\"c\":1}"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})",
       {"{}", "{\"a\":1,\"x\":true}", "{\"ab\":false}", "{\"x\":true,\"y\":false}"}, {"{\"a\":true}", "{\"x\":1}"}},
      {R"({"type":"object","required":["k"],"additionalProperties":true})", {"{\"k\":[1,{}]}"}, {"{}"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})", {"[1]", "[1, 2,3]"}, {"[]", "[1,2,3,4]", "[\"a\"]"}},
      {R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
       {"[]", "[\"a\"]", "[\"a\",1]"}, {"[\"a\",1,2]", "[1]"}},
      {R"({"type":"array","items":[{"type":"string"}],"additionalItems":{"type":"null"},"minItems":2})",
       {"[\"a\",null]", "[\"a\",null,null]"}, {"[\"a\"]", "[\"a\",1]"}},
      {R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})", {"1", "\"a\""}, {"\"ab\"", "1.5"}},
      {R"({"oneOf":[{"type":"integer"},{"type":"string"}]})", {"1", "\"a\""}, {"null"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}},"required":["v"]}},"$ref":"#/$defs/node"})",
       {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3}}}"}, {"{\"v\":1,\"next\":{}}"}},
      {R"({"type":"object","properties":{"child":{"$ref":"#"}}})", {"{}", "{\"child\":{\"child\":{}}}"}, {"{\"child\":1}"}},
      {R"({})", {"1", "{\"a\":[null,\"x\"]}", "\"s\""}, {"{\"a\"}"}},
      {R"({"properties":{"p":{"type":"string"}}})", {"{}", "{\"p\":\"v\"}"}, {"\"s\""}},
  };
  for (const Case& c : cases) {
    INFO(c.schema);
    const auto g = schema_grammar(c.schema);
    for (const char* s : c.ok) {
      INFO("valid: " << s);
      CHECK(matches(g, s));
    }
    for (const char* s : c.bad) {
      INFO("invalid: " << s);
      CHECK_FALSE(matches(g, s));
    }
  }
}

TEST_CASE("JSON Schema: refusals name the keyword and where it is", "[grammar][json_schema]") {
  CHECK_THAT(schema_error(R"({"type":"integer","multipleOf":2})"), Catch::Contains("'multipleOf' is not supported"));
  CHECK_THAT(schema_error(R"({"properties":{"a":{"not":{}}}})"), Catch::Contains("#/properties/a: 'not'"));
  CHECK_THAT(schema_error(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})"), Catch::Contains("may both match"));
  CHECK_THAT(schema_error(R"({"$ref":"#/definitions/missing"})"), Catch::Contains("does not resolve"));
  CHECK_THAT(schema_error(R"({"$ref":"http://x/y.json"})"), Catch::Contains("not local"));
  CHECK_THAT(schema_error(R"({"type":"array","uniqueItems":true})"), Catch::Contains("'uniqueItems'"));
  CHECK_THAT(schema_error(R"({"type":"string","pattern":"(a)\\1"})"), Catch::Contains("backreferences"));
  CHECK_THAT(schema_error(R"({"type":"strin"})"), Catch::Contains("unknown type 'strin'"));
  CHECK_THAT(schema_error(R"({"type":"object","required":["a"],"additionalProperties":false})"),
             Catch::Contains("required property 'a'"));
  CHECK_THAT(schema_error(R"({"type":"string","maxLength":100000})"), Catch::Contains("'maxLength' above"));
  // A grammar needing more distinct token masks than compiling may spend.
  std::mt19937 rng(3);
  std::string words = "root ::= ";
  for (int w = 0; w < 2500; ++w) {
    words += w ? " | \"" : "\"";
    for (int c = 0; c < 12; ++c) words += static_cast<char>('a' + rng() % 26);
    words += "\"";
  }
  try {
    compile(parse_ebnf(words), edge_vocab());
    FAIL("compiled");
  } catch (const GrammarError& e) {
    CHECK_THAT(e.what(), Catch::Contains("distinct token masks"));
  }
  CHECK_THAT(schema_error(R"({"type":"number","minimum":0.2,"maximum":0.8})"), Catch::Contains("unit interval"));
  CHECK_THAT(schema_error(R"({"type":"integer","minimum":3,"maximum":2})"), Catch::Contains("no integer"));
  CHECK_THAT(schema_error("{\"type\":"), Catch::Contains("not JSON"));
  CHECK_THAT(schema_error(R"({"$ref":"#/definitions/a","maxItems":2,"definitions":{"a":{}}})"),
             Catch::Contains("'maxItems' beside '$ref'"));
  CHECK_THAT(schema_error(R"(false)"), Catch::Contains("matches nothing"));
  // oneOf alternatives made exclusive by required properties and additionalProperties false.
  CHECK_NOTHROW(schema_grammar(R"({"oneOf":[
      {"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false},
      {"type":"object","properties":{"b":{"type":"string"}},"required":["b"],"additionalProperties":false}]})"));
}

TEST_CASE("integer ranges accept exactly their members", "[grammar][json_schema]") {
  std::mt19937 rng(11);
  for (int round = 0; round < 12; ++round) {
    int64_t lo = static_cast<int64_t>(rng() % 2000) - 1000, hi = lo + static_cast<int64_t>(rng() % 1500);
    if (round == 0) lo = hi = 0;
    Grammar gr;
    gr.set_root(gr.add_rule("root", json_integer_range(lo, hi)));
    const auto g = compile(gr, edge_vocab());
    for (int64_t v = -2600; v <= 2600; v += 1 + static_cast<int64_t>(rng() % 7)) {
      INFO("[" << lo << ", " << hi << "] " << v);
      CHECK(matches(g, std::to_string(v)) == (v >= lo && v <= hi));
    }
    CHECK(matches(g, std::to_string(lo)));
    CHECK(matches(g, std::to_string(hi)));
    CHECK_FALSE(matches(g, "0" + std::to_string(std::max<int64_t>(hi, 1))));
  }
  Grammar big;
  big.set_root(big.add_rule("root", json_integer()));
  const auto g = compile(big, edge_vocab());
  CHECK(matches(g, "999999999999999999"));
  CHECK_FALSE(matches(g, "1000000000000000000"));
}

TEST_CASE("json_object accepts any object and only objects", "[grammar][json_schema]") {
  const auto g = compile(json_object_grammar(), edge_vocab());
  for (const char* ok : {"{}", "{\"a\":[1,{\"b\":null}],\"c\":\"\\u00e9\\ud83d\\ude00\"}", "{\n  \"x\": true\n}"})
    CHECK(matches(g, ok));
  for (const char* bad : {"[]", "1", "{\"a\":}", "{\"a\":\"\\ud800\"}", " {}"}) CHECK_FALSE(matches(g, bad));
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const std::string out = test::random_walk(g, seed, 60, {0});
    INFO(out);
    CHECK(out.rfind("{", 0) == 0);
  }
}

TEST_CASE("random walks under schemas parse as JSON", "[grammar][json_schema]") {
  const std::vector<std::string> schemas = {
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
          "tags":{"type":"array","items":{"type":"string","maxLength":4},"maxItems":3}},"required":["name","age"]})",
      R"({"type":"object","properties":{"child":{"$ref":"#"},"v":{"enum":["a","b"]}},"required":["v"]})",
  };
  for (const std::string& s : schemas) {
    const auto g = schema_grammar(s);
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      grammar::GrammarMatcher m(g, {0});
      const std::string out = test::random_walk(g, seed, 400, {0}, seed <= 2);
      INFO(s << "\n" << out);
      // A walk that ended (the last token an end token) produced a complete value.
      grammar::GrammarMatcher replay(g, {0});
      REQUIRE(replay.accept_bytes(out));
      if (replay.can_end()) CHECK_NOTHROW(nlohmann::json::parse(out));
    }
  }
}
