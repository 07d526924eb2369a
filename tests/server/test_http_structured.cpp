// Structured outputs over HTTP: response_format json_object / json_schema on chat and
// completions, vLLM's structured_outputs and guided_* fields, tool_choice "required" and a
// named function (Qwen XML tool calls parsed into tool_calls), streaming, reasoning before the
// constraint, and the 400s for what cannot be compiled. The tiny random model samples at
// temperature 1 under the masks (a logit_bias on JSON structure tokens makes values end
// within max_tokens); a ScriptedModel shows the constraint waiting for </think>.
#include <catch2/catch.hpp>

#include "model/tokenizer/utf8.h"
#include "tests/server/server_fixture.h"
#include "tests/server/http_test_util.h"

using namespace ds::test;
using ds::server::dump_json;

namespace {

Json user(const std::string& text) { return Json::array({Json{{"role", "user"}, {"content", text}}}); }

// +3 on every token holding a JSON structure character, as {"id": bias} for logit_bias.
Json structure_bias(const ds::tok::Tokenizer& tok) {
  Json bias = Json::object();
  for (int32_t t = 0; t < tok.vocab_size(); ++t)
    if (!tok.is_special(t) && tok.token_bytes(t).find_first_of("\"{}[],") != std::string_view::npos)
      bias[std::to_string(t)] = 3;
  return bias;
}

Json no_thinking() { return Json{{"enable_thinking", false}}; }

const char* kWeatherTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                   "days": {"type": "integer", "minimum": 1, "maximum": 14},
                   "hourly": {"type": "boolean"}},
    "required": ["unit", "days"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
    "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["zone"]}}}])";

void check_weather_call(const Json& call, const std::string& want_name = "") {
  const std::string name = call["function"]["name"];
  if (!want_name.empty()) CHECK(name == want_name);
  const Json args = Json::parse(call["function"]["arguments"].get<std::string>());
  INFO(name << " " << args.dump());
  if (name == "get_weather") {
    CHECK((args["unit"] == "celsius" || args["unit"] == "fahrenheit"));
    REQUIRE(args["days"].is_number_integer());
    CHECK(args["days"].get<int>() >= 1);
    CHECK(args["days"].get<int>() <= 14);
    if (args.contains("hourly")) CHECK(args["hourly"].is_boolean());
  } else {
    REQUIRE(name == "get_time");
    CHECK((args["zone"] == "UTC" || args["zone"] == "CET"));
  }
}

}  // namespace

TEST_CASE("json_object and json_schema: every completed reply is valid JSON of the schema", "[structured]") {
  TestServer srv;
  const Json bias = structure_bias(srv.tokenizer());
  const Json schema = Json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
      "required": ["name", "age"], "additionalProperties": false})");
  int completed = 0;
  for (int seed = 0; seed < 6; ++seed) {
    Json b = {{"messages", user("A person as JSON")}, {"max_tokens", 160}, {"temperature", 1}, {"seed", seed},
              {"logit_bias", bias}, {"chat_template_kwargs", no_thinking()}};
    b["response_format"] = seed % 2 ? Json{{"type", "json_object"}}
                                     : Json{{"type", "json_schema"},
                                            {"json_schema", {{"name", "person"}, {"schema", schema}, {"strict", true}}}};
    auto r = srv.post("/v1/chat/completions", b);
    REQUIRE(r.status == 200);
    const Json& choice = r.body["choices"][0];
    if (choice["finish_reason"] != "stop") continue;
    const std::string content = choice["message"]["content"];
    INFO(content);
    const Json v = Json::parse(content, nullptr, false);
    REQUIRE(v.is_object());
    if (seed % 2 == 0) {
      REQUIRE(v["name"].is_string());
      CHECK(ds::tok::utf8::length(v["name"].get<std::string>()) <= 12);
      REQUIRE(v["age"].is_number_integer());
      CHECK(v["age"].get<int>() <= 120);
      for (auto it = v.begin(); it != v.end(); ++it) CHECK((it.key() == "name" || it.key() == "age" || it.key() == "tags"));
    }
    ++completed;
  }
  CHECK(completed >= 4);

  // Streaming: the deltas add up to the same kind of value; completions take it too.
  Json s = {{"messages", user("JSON please")}, {"max_tokens", 160}, {"temperature", 1}, {"seed", 3},
            {"logit_bias", bias}, {"stream", true}, {"chat_template_kwargs", no_thinking()},
            {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "p"}, {"schema", schema}}}}}};
  auto streamed = collect_stream(parse_sse(srv.post("/v1/chat/completions", s).text), true);
  if (streamed[0].finish == "stop") CHECK(Json::parse(streamed[0].content)["age"].is_number_integer());
  Json c = {{"prompt", "Data:"}, {"max_tokens", 160}, {"temperature", 1}, {"seed", 5}, {"logit_bias", bias},
            {"response_format", {{"type", "json_object"}}}};
  auto cr = srv.post("/v1/completions", c);
  REQUIRE(cr.status == 200);
  if (cr.body["choices"][0]["finish_reason"] == "stop") CHECK(Json::parse(cr.body["choices"][0]["text"].get<std::string>()).is_object());
  CHECK(srv.wait_pools_free());
}

TEST_CASE("structured_outputs and guided_*: regex, choice, grammar, json", "[structured]") {
  TestServer srv;
  for (int seed = 0; seed < 4; ++seed) {
    Json b = {{"prompt", "Pick:"}, {"max_tokens", 40}, {"temperature", 1}, {"seed", seed}};
    Json choice = b;
    choice["guided_choice"] = {"yes", "no", "maybe"};
    auto r = srv.post("/v1/completions", choice);
    REQUIRE(r.status == 200);
    const std::string text = r.body["choices"][0]["text"];
    CHECK((text == "yes" || text == "no" || text == "maybe"));
    CHECK(r.body["choices"][0]["finish_reason"] == "stop");

    Json regex = b;
    regex["structured_outputs"] = {{"regex", "[0-9]{3}-[A-Z]{2}"}};
    const std::string code = srv.post("/v1/completions", regex).body["choices"][0]["text"];
    INFO(code);
    REQUIRE(code.size() == 6);
    CHECK(std::isdigit(static_cast<unsigned char>(code[0])));
    CHECK(code[3] == '-');
    CHECK(std::isupper(static_cast<unsigned char>(code[5])));

    Json gbnf = b;
    gbnf["guided_grammar"] = "root ::= \"(\" num (\"+\" num){0,2} \")\"\nnum ::= [1-9]";
    const std::string expr = srv.post("/v1/completions", gbnf).body["choices"][0]["text"];
    INFO(expr);
    REQUIRE(expr.size() >= 3);
    CHECK(expr.front() == '(');
    CHECK(expr.back() == ')');

    Json json = b;
    json["structured_outputs"] = {{"json", R"({"enum": [1, 2, 3]})"}, {"disable_any_whitespace", true}};
    const std::string one = srv.post("/v1/completions", json).body["choices"][0]["text"];
    CHECK((one == "1" || one == "2" || one == "3"));
  }
}

TEST_CASE("tool_choice required and named: the reply is tool calls of the tools' schemas", "[structured]") {
  TestServer srv;
  const Json tools = Json::parse(kWeatherTools);
  int calls = 0;
  for (int seed = 0; seed < 6; ++seed) {
    Json b = {{"messages", user("Weather?")}, {"tools", tools}, {"tool_choice", "required"}, {"max_tokens", 200},
              {"temperature", 1}, {"seed", seed}, {"chat_template_kwargs", no_thinking()}};
    if (seed >= 3) b["tool_choice"] = Json{{"type", "function"}, {"function", {{"name", "get_time"}}}};
    if (seed == 2) b["parallel_tool_calls"] = false;
    auto r = srv.post("/v1/chat/completions", b);
    REQUIRE(r.status == 200);
    const Json& choice = r.body["choices"][0];
    if (choice["finish_reason"] == "length") continue;
    INFO(r.body.dump());
    CHECK(choice["finish_reason"] == "tool_calls");
    const Json& msg = choice["message"];
    REQUIRE(msg.contains("tool_calls"));
    REQUIRE(msg["tool_calls"].size() >= 1);
    if (seed >= 2) CHECK(msg["tool_calls"].size() == 1);
    for (const Json& call : msg["tool_calls"]) check_weather_call(call, seed >= 3 ? "get_time" : "");
    ++calls;
  }
  CHECK(calls >= 4);

  // Streamed: tool-call deltas whose arguments add up to a valid call.
  Json b = {{"messages", user("Time?")}, {"tools", tools}, {"max_tokens", 200}, {"temperature", 1}, {"seed", 9},
            {"stream", true}, {"chat_template_kwargs", no_thinking()},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}};
  auto got = collect_stream(parse_sse(srv.post("/v1/chat/completions", b).text), true);
  if (got[0].finish == "tool_calls") {
    REQUIRE(!got[0].tool_deltas.empty());
    std::string args;
    for (const Json& d : got[0].tool_deltas) args += d["function"]["arguments"].get<std::string>();
    check_weather_call(Json{{"function", {{"name", got[0].tool_deltas[0]["function"]["name"]}, {"arguments", args}}}},
                       "get_weather");
  }
  CHECK(srv.wait_pools_free());
}

TEST_CASE("reasoning comes first, unconstrained; the constraint applies after </think>", "[structured]") {
  TestServerConfig cfg;
  cfg.scripted = true;
  cfg.script = encode("<think>\nPlain words, not JSON.\n</think>\n\n{\"a\": 7}");
  TestServer srv(cfg);
  Json b = {{"messages", user("A?")}, {"max_tokens", 60}, {"temperature", 0},
            {"response_format",
             {{"type", "json_schema"},
              {"json_schema", {{"name", "a"}, {"schema", Json::parse(R"({"type": "object", "properties":
                  {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false})")}}}}}};
  auto r = srv.post("/v1/chat/completions", b);
  REQUIRE(r.status == 200);
  const Json& msg = r.body["choices"][0]["message"];
  CHECK(msg["reasoning_content"] == "Plain words, not JSON.\n");
  CHECK(msg["content"] == "{\"a\": 7}");
  CHECK(r.body["choices"][0]["finish_reason"] == "stop");
  // With thinking off the same script is forced into the schema from its first token.
  b["chat_template_kwargs"] = no_thinking();
  auto off = srv.post("/v1/chat/completions", b);
  REQUIRE(off.status == 200);
  const std::string content = off.body["choices"][0]["message"]["content"];
  INFO(content);
  CHECK(content.rfind("{", 0) == 0);
  CHECK(off.body["choices"][0]["message"]["reasoning_content"].is_null());
}

TEST_CASE("structured outputs: what cannot be compiled is a 400 naming the field", "[structured]") {
  TestServer srv;
  auto expect = [&](const Json& extra, const std::string& param, const std::string& words) {
    Json b = {{"messages", user("x")}, {"max_tokens", 4}};
    for (auto it = extra.begin(); it != extra.end(); ++it) b[it.key()] = it.value();
    auto r = srv.post("/v1/chat/completions", b);
    INFO(extra.dump() << " -> " << r.body.dump());
    CHECK(r.status == 400);
    CHECK(r.body["error"]["param"] == param);
    CHECK(r.body["error"]["message"].get<std::string>().find(words) != std::string::npos);
  };
  expect({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "integer"}, {"multipleOf", 3}}}}}}}},
         "response_format.json_schema.schema", "'multipleOf' is not supported");
  expect({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}},
         "response_format.json_schema.schema", "required");
  expect({{"guided_regex", "(a)\\1"}}, "guided_regex", "backreferences");
  expect({{"guided_grammar", "root ::= undefined_rule"}}, "guided_grammar", "not defined");
  expect({{"guided_json", "{not json"}}, "guided_json", "not valid JSON");
  expect({{"guided_choice", {"a"}}, {"guided_regex", "a"}}, "guided_choice", "give one");
  expect({{"tool_choice", "required"}}, "tool_choice", "no 'tools'");
  expect({{"tools", Json::parse(kWeatherTools)}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
         "tool_choice", "'nope'");
  expect({{"tools", Json::parse(kWeatherTools)}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}},
         "response_format", "cannot be combined");
  expect({{"structured_outputs", {{"structural_tag", "x"}}}}, "structured_outputs.structural_tag", "");
}
