// Reasoning and tool calls through the HTTP API, on a ScriptedModel that writes what a
// random-weight model never does: <think> blocks and Qwen XML tool calls.
#include <catch2/catch.hpp>

#include <set>

#include "tests/server/http_test_util.h"
#include "tests/server/server_fixture.h"

using namespace ds::test;
using ds::server::dump_json;

TEST_CASE("reasoning and tool calls: split, parsed, streamed with stable ids", "[tools]") {
  TestServerConfig cfg;
  cfg.scripted = true;
  cfg.script = encode(
      "<think>\nThe user wants the weather.\n</think>\n\nChecking.\n<tool_call>\n<function=get_weather>\n"
      "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>");
  TestServer srv(cfg);
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather forecast", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}])");
  Json b = {{"messages", Json::array({Json{{"role", "user"}, {"content", "Weather in Paris?"}}})},
            {"tools", tools},
            {"max_tokens", 200}};

  auto r = srv.post("/v1/chat/completions", b);
  REQUIRE(r.status == 200);
  const Json& choice = r.body["choices"][0];
  const Json& msg = choice["message"];
  CHECK(choice["finish_reason"] == "tool_calls");
  CHECK(msg["reasoning_content"] == "The user wants the weather.\n");
  CHECK(msg["reasoning"] == msg["reasoning_content"]);
  CHECK(msg["content"] == "Checking.\n");
  REQUIRE(msg["tool_calls"].size() == 1);
  const Json& call = msg["tool_calls"][0];
  CHECK(call["type"] == "function");
  CHECK(call["id"].get<std::string>().rfind("call_", 0) == 0);
  CHECK(call["function"]["name"] == "get_weather");
  CHECK(Json::parse(call["function"]["arguments"].get<std::string>()) == Json::parse(R"({"city": "Paris", "days": 2})"));

  // Streamed: reasoning and content deltas, then tool-call deltas with one index and id.
  b["stream"] = true;
  auto s = srv.post("/v1/chat/completions", b);
  auto got = collect_stream(parse_sse(s.text), true);
  CHECK(got[0].reasoning == "The user wants the weather.\n");
  CHECK(got[0].content == "Checking.\n");
  CHECK(got[0].finish == "tool_calls");
  REQUIRE(got[0].tool_deltas.size() >= 2);
  const Json& first = got[0].tool_deltas[0];
  CHECK(first["index"] == 0);
  CHECK(first["function"]["name"] == "get_weather");
  const std::string id = first["id"];
  std::string args;
  for (const auto& d : got[0].tool_deltas) {
    CHECK(d["index"] == 0);
    if (d.contains("id")) CHECK(d["id"] == id);
    args += d["function"]["arguments"].get<std::string>();
  }
  CHECK(Json::parse(args) == Json::parse(R"({"city": "Paris", "days": 2})"));

  // n = 2: two calls with different ids.
  b.erase("stream");
  b["n"] = 2;
  auto two = srv.post("/v1/chat/completions", b);
  CHECK(two.body["choices"][0]["message"]["tool_calls"][0]["id"] !=
        two.body["choices"][1]["message"]["tool_calls"][0]["id"]);

  // Without tools (or with tool_choice none) the text is left alone.
  b.erase("n");
  b["tool_choice"] = "none";
  auto none = srv.post("/v1/chat/completions", b);
  CHECK(none.body["choices"][0]["finish_reason"] == "stop");
  CHECK(none.body["choices"][0]["message"]["content"].get<std::string>().find("<tool_call>") != std::string::npos);
  CHECK_FALSE(none.body["choices"][0]["message"].contains("tool_calls"));

  // An assistant turn with tool_calls and a tool result render through the template.
  Json follow = {{"messages", Json::parse(R"([
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])")},
                 {"tools", tools},
                 {"max_tokens", 4}};
  CHECK(srv.post("/v1/chat/completions", follow).status == 200);
  CHECK(srv.wait_pools_free());
}
