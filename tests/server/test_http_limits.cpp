// The HTTP front end against issue 44's probe, as regression tests: operator chains 100,000
// deep at every structured-output entry point, compile bombs, abandoned compiles, nested tool
// schemas, the API key checked before the body, trickled bodies, the in-flight body budget
// (held until the reply), the connection cap under trickling clients, max_tokens near 2^63,
// "<think>" inside constrained output, tool names, and the wording of errors. Against the
// real HttpServer in-process (tests/server/server_fixture.h).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/server/server_fixture.h"

using namespace ds::test;
using ds::server::dump_json;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Json user(const std::string& text) { return Json::array({Json{{"role", "user"}, {"content", text}}}); }

Json chat_with(const Json& fields) {
  Json b = {{"messages", user("x")}, {"max_tokens", 4}, {"temperature", 0}};
  for (auto it = fields.begin(); it != fields.end(); ++it) b[it.key()] = it.value();
  return b;
}

Json string_schema(const std::string& pattern) { return Json{{"type", "string"}, {"pattern", pattern}}; }

Json tool_schema(const std::string& pattern) {
  return Json{{"type", "object"}, {"properties", {{"q", string_schema(pattern)}}}, {"required", {"q"}}};
}

// The status of the first response on a raw connection, or 0.
int status_of(RawClient& c, std::chrono::milliseconds timeout) {
  const std::string got = c.read_until("\r\n\r\n", timeout);
  if (got.rfind("HTTP/1.", 0) != 0 || got.size() < 12) return 0;
  return std::stoi(got.substr(9, 3));
}

std::string post_head(size_t length, const std::string& extra = "") {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(length) + "\r\n\r\n";
}

// The nine ways a client's pattern or grammar reaches the compiler, each with `pattern`.
std::vector<std::pair<std::string, Json>> entry_points(const std::string& pattern) {
  const Json rf = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", string_schema(pattern)}}}};
  const Json tools = Json::array(
      {Json{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", tool_schema(pattern)}}}}});
  return {
      {"/v1/chat/completions", chat_with({{"guided_regex", pattern}})},
      {"/v1/chat/completions", chat_with({{"structured_outputs", {{"regex", pattern}}}})},
      {"/v1/chat/completions", chat_with({{"response_format", rf}})},
      {"/v1/chat/completions", chat_with({{"guided_json", string_schema(pattern)}})},
      {"/v1/chat/completions", chat_with({{"tools", tools}, {"tool_choice", "required"}})},
      {"/v1/completions", Json{{"prompt", "x"}, {"max_tokens", 4}, {"guided_regex", pattern}}},
      {"/v1/responses",
       Json{{"input", "x"},
            {"max_output_tokens", 4},
            {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", string_schema(pattern)}}}}}}},
      {"/v1/messages",
       Json{{"max_tokens", 4},
            {"messages", user("x")},
            {"tools", Json::array({Json{{"name", "f"}, {"input_schema", tool_schema(pattern)}}})},
            {"tool_choice", {{"type", "tool"}, {"name", "f"}}}}},
  };
}

}  // namespace

TEST_CASE("limits: 100,000 chained operators are a 400 at every structured-output entry point", "[limits]") {
  TestServer srv;
  for (const std::string& chain : {std::string(100000, '*'), std::string(100000, '?')}) {
    for (const auto& [path, body] : entry_points("a" + chain)) {
      INFO(path << " " << dump_json(body).substr(0, 200));
      const auto r = srv.post(path, body);
      CHECK(r.status == 400);
      // OpenAI's error shape, or Anthropic's on /v1/messages: both carry error.message.
      CHECK_THAT(r.body["error"]["message"].get<std::string>(), Catch::Contains("quantifier cannot follow"));
    }
    // The ninth: a grammar whose counted repetitions nest 20,000 deep.
    std::string gbnf = "root ::= \"a\"";
    for (int i = 0; i < 20000; ++i) gbnf += "{1,2}";
    const auto r = srv.post("/v1/chat/completions", chat_with({{"guided_grammar", gbnf}}));
    CHECK(r.status == 400);
    CHECK(r.body["error"]["param"] == "guided_grammar");
  }
  CHECK(srv.get("/health").status == 200);
}

TEST_CASE("limits: a compile bomb is refused within its budget, and again at once", "[limits]") {
  TestServer srv;
  for (const char* pattern : {"((a{100}){100}){100}", "^((a{100}){100}){100}$"}) {
    INFO(pattern);
    auto t0 = Clock::now();
    const auto r = srv.post("/v1/chat/completions", chat_with({{"guided_json", string_schema(pattern)}}));
    CHECK(seconds_since(t0) < 5);
    CHECK(r.status == 400);
    CHECK_THAT(r.body["error"]["message"].get<std::string>(), Catch::Contains("counted repetitions"));
    t0 = Clock::now();
    CHECK(srv.post("/v1/chat/completions", chat_with({{"guided_json", string_schema(pattern)}})).status == 400);
    CHECK(seconds_since(t0) < 1);
  }
  // The Responses API names its own field.
  const auto r = srv.post(
      "/v1/responses",
      Json{{"input", "x"},
           {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", {{"type", "integer"}, {"multipleOf", 2}}}}}}}});
  CHECK(r.status == 400);
  CHECK(r.body["error"]["param"] == "text.format.schema");
  CHECK_THAT(r.body["error"]["message"].get<std::string>(), Catch::StartsWith("'text.format.schema' cannot be used"));
  CHECK_THAT(srv.post("/v1/chat/completions", chat_with({{"guided_regex", "(?i)yes"}})).body["error"]["message"].get<std::string>(),
             Catch::Contains("inline modifiers"));
}

TEST_CASE("limits: a client that leaves while its grammar compiles cancels the compile", "[limits]") {
  TestServerConfig cfg;
  cfg.grammar.limits.max_states = 50'000'000;
  cfg.grammar.limits.max_bytes = int64_t{2} << 30;
  cfg.grammar.limits.max_time = std::chrono::seconds(120);
  TestServer srv(cfg);
  // A searched pattern whose determinisation takes seconds (262,144 states).
  const std::string body = dump_json(chat_with({{"guided_regex", "[ab]*a[ab]{17}"}}));
  RawClient c(srv.port());
  REQUIRE(c.send_bytes(post_head(body.size()) + body, 2000));
  const auto t0 = Clock::now();
  while (srv.grammars().compiles_in_flight() == 0 && seconds_since(t0) < 5)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(srv.grammars().compiles_in_flight() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  REQUIRE(srv.grammars().compiles_in_flight() == 1);  // still compiling
  c.close();
  const auto t1 = Clock::now();
  while (srv.grammars().compiles_in_flight() > 0 && seconds_since(t1) < 5)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(srv.grammars().compiles_in_flight() == 0);
  CHECK(seconds_since(t1) < 1.0);
  CHECK(srv.get("/health").status == 200);
}

TEST_CASE("limits: tool schemas nested 14 deep compile", "[limits]") {
  // The scripted model: the prompt renders the schema (1,200 tokens), which the tiny model
  // would take long to prefill under the sanitizers; the grammar is compiled all the same.
  TestServerConfig cfg;
  cfg.scripted = true;
  cfg.script = encode("<tool_call>\n<function=nest>\n");
  TestServer srv(cfg);
  Json schema = {{"type", "string"}};
  for (int d = 0; d < 14; ++d)
    schema = {{"type", "object"},
              {"properties", {{"name", {{"type", "string"}}}, {"child", schema}}},
              {"required", {"name", "child"}},
              {"additionalProperties", false}};
  const Json tools = Json::array(
      {Json{{"type", "function"}, {"function", {{"name", "nest"}, {"parameters", {{"type", "object"},
                                                                                   {"properties", {{"tree", schema}}},
                                                                                   {"required", {"tree"}}}}}}}});
  const auto r = srv.post("/v1/chat/completions", chat_with({{"tools", tools}, {"tool_choice", "required"}}));
  INFO(r.text);
  CHECK(r.status == 200);
  CHECK(srv.grammars().size() == 1);
}

TEST_CASE("limits: the API key is checked on the head, before the body is read", "[limits]") {
  TestServerConfig cfg;
  cfg.api_key = "sesame";
  TestServer srv(cfg);
  {
    RawClient c(srv.port());
    REQUIRE(c.send_bytes(post_head(4u << 20), 1000));  // announces 4 MiB, sends none of it
    CHECK(status_of(c, std::chrono::seconds(2)) == 401);
  }
  {
    RawClient c(srv.port());
    REQUIRE(c.send_bytes(post_head(1000, "Expect: 100-continue\r\n"), 1000));
    const std::string got = c.read_until("\r\n\r\n", std::chrono::seconds(2));
    CHECK(got.rfind("HTTP/1.1 401", 0) == 0);
  }
  // With the key the same head waits for its body.
  RawClient c(srv.port());
  REQUIRE(c.send_bytes(post_head(1000, "Authorization: Bearer sesame\r\n"), 1000));
  CHECK(status_of(c, std::chrono::milliseconds(300)) == 0);
}

TEST_CASE("limits: a trickled body is cut off by the minimum rate and the body deadline", "[limits]") {
  TestServerConfig cfg;
  cfg.api_key = "sesame";
  cfg.transport.min_body_rate = 1000;
  cfg.transport.body_rate_grace = std::chrono::milliseconds(500);
  TestServer srv(cfg);
  const std::string key = "Authorization: Bearer sesame\r\n";
  {
    RawClient c(srv.port());
    REQUIRE(c.send_bytes(post_head(100000, key), 1000));
    const auto t0 = Clock::now();
    int status = 0;
    for (int i = 0; i < 40 && status == 0; ++i) {
      c.send_bytes("{", 100);
      status = status_of(c, std::chrono::milliseconds(100));
    }
    CHECK(status == 408);
    CHECK(seconds_since(t0) < 3);
  }
  TestServerConfig dl = cfg;
  dl.transport.min_body_rate = 0;
  dl.transport.body_timeout = std::chrono::milliseconds(800);
  TestServer srv2(dl);
  RawClient c(srv2.port());
  REQUIRE(c.send_bytes(post_head(100000, key), 1000));
  const auto t0 = Clock::now();
  int status = 0;
  for (int i = 0; i < 40 && status == 0; ++i) {
    c.send_bytes(std::string(100, ' '), 100);
    status = status_of(c, std::chrono::milliseconds(100));
  }
  CHECK(status == 408);
  CHECK(seconds_since(t0) < 2.5);
}

TEST_CASE("limits: bodies being received share one budget", "[limits]") {
  TestServerConfig cfg;
  cfg.transport.limits.max_body_bytes = 1u << 20;
  cfg.transport.max_inflight_body_bytes = 1u << 20;
  TestServer srv(cfg);
  RawClient a(srv.port());
  REQUIRE(a.send_bytes(post_head(700000) + "{\"messages\":", 1000));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  RawClient b(srv.port());
  REQUIRE(b.send_bytes(post_head(700000), 1000));
  CHECK(status_of(b, std::chrono::seconds(2)) == 503);
  a.close();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  RawClient c(srv.port());
  REQUIRE(c.send_bytes(post_head(700000), 1000));
  CHECK(status_of(c, std::chrono::milliseconds(300)) == 0);  // accepted: waits for its body
}

TEST_CASE("limits: a body counts against the budget until its reply", "[limits]") {
  // The scripted model takes 4 x 150 ms to answer, so the first request is being handled
  // (its body parsed, still in memory) while the second one's head arrives.
  TestServerConfig cfg;
  cfg.scripted = true;
  cfg.script = encode("one two three four");
  cfg.step_delay_ms = 150;
  cfg.transport.limits.max_body_bytes = 1u << 20;
  cfg.transport.max_inflight_body_bytes = 1u << 20;
  TestServer srv(cfg);
  std::string body = dump_json(chat_with({}));
  body += std::string(700000 - body.size(), ' ');  // JSON whitespace: a large, valid body
  RawClient a(srv.port());
  REQUIRE(a.send_bytes(post_head(body.size()) + body, 2000));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  RawClient b(srv.port());
  REQUIRE(b.send_bytes(post_head(700000), 1000));
  CHECK(status_of(b, std::chrono::seconds(2)) == 503);
  CHECK(status_of(a, std::chrono::seconds(10)) == 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  RawClient c(srv.port());
  REQUIRE(c.send_bytes(post_head(700000), 1000));
  CHECK(status_of(c, std::chrono::milliseconds(300)) == 0);  // the budget is free again
}

TEST_CASE("limits: at the connection cap a new client is served ahead of trickling ones", "[limits]") {
  TestServerConfig cfg;
  cfg.transport.max_connections = 8;
  TestServer srv(cfg);
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<RawClient>(srv.port()));
    REQUIRE(slow.back()->send_bytes(post_head(5000) + "{", 1000));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  auto client = srv.client(5);
  const auto r = client.Get("/health");
  REQUIRE(r);
  CHECK(r->status == 200);
}

TEST_CASE("limits: max_tokens near 2^63 is a 400 on every generation endpoint", "[limits]") {
  TestServer srv;
  for (const int64_t big : {INT64_MAX, INT64_MAX - 10}) {
    const std::pair<std::string, Json> cases[] = {
        {"/v1/chat/completions", Json{{"messages", user("x")}, {"max_tokens", big}}},
        {"/v1/completions", Json{{"prompt", "x"}, {"max_tokens", big}}},
        {"/v1/messages", Json{{"messages", user("x")}, {"max_tokens", big}}},
        {"/v1/responses", Json{{"input", "x"}, {"max_output_tokens", big}}},
    };
    for (const auto& [path, body] : cases) {
      INFO(path << " " << big);
      const auto r = srv.post(path, body);
      CHECK(r.status == 400);
      if (path != "/v1/messages") CHECK(r.body["error"]["code"] == "context_length_exceeded");
    }
  }
  CHECK(srv.wait_pools_free());
}

TEST_CASE("limits: with thinking off, <think> in constrained output is content", "[limits]") {
  TestServerConfig cfg;
  cfg.scripted = true;
  cfg.script = encode("{\"a\": \"<think>not reasoning</think>\"}");
  TestServer srv(cfg);
  const Json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}, {"required", {"a"}},
                       {"additionalProperties", false}};
  Json b = {{"messages", user("x")}, {"max_tokens", 60}, {"temperature", 0},
            {"chat_template_kwargs", {{"enable_thinking", false}}},
            {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "a"}, {"schema", schema}}}}}};
  const auto r = srv.post("/v1/chat/completions", b);
  REQUIRE(r.status == 200);
  const Json& msg = r.body["choices"][0]["message"];
  INFO(msg.dump());
  CHECK(msg["content"] == "{\"a\": \"<think>not reasoning</think>\"}");
  CHECK(msg["reasoning_content"].is_null());
  CHECK(r.body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0);
  CHECK(r.body["choices"][0]["finish_reason"] == "stop");
  CHECK_NOTHROW(Json::parse(msg["content"].get<std::string>()));
}

TEST_CASE("limits: tool names are what the APIs define", "[limits]") {
  TestServer srv;
  for (const std::string& bad : std::vector<std::string>{"</function>", "a b", "", std::string(65, 'x'), "f\nn"}) {
    INFO(bad);
    const Json fn = {{"name", bad}, {"parameters", {{"type", "object"}}}};
    auto r = srv.post("/v1/chat/completions",
                      chat_with({{"tools", Json::array({Json{{"type", "function"}, {"function", fn}}})}}));
    CHECK(r.status == 400);
    CHECK(r.body["error"]["param"] == "tools[0].function.name");
    r = srv.post("/v1/messages", Json{{"max_tokens", 4}, {"messages", user("x")},
                                      {"tools", Json::array({Json{{"name", bad}, {"input_schema", {{"type", "object"}}}}})}});
    CHECK(r.status == 400);
    r = srv.post("/v1/responses", Json{{"input", "x"}, {"tools", Json::array({Json{{"type", "function"}, {"name", bad}}})}});
    CHECK(r.status == 400);
    CHECK(r.body["error"]["param"] == "tools[0].name");
  }
  const Json ok = {{"name", "get-weather_2"}, {"parameters", {{"type", "object"}}}};
  CHECK(srv.post("/v1/chat/completions", chat_with({{"tools", Json::array({Json{{"type", "function"}, {"function", ok}}})},
                                                    {"tool_choice", "required"}}))
            .status == 200);
  // A parameter name the markup cannot carry is refused when the call is forced.
  const Json odd = {{"name", "f"}, {"parameters", {{"type", "object"}, {"properties", {{"a>b", {{"type", "string"}}}}}}}};
  const auto r = srv.post("/v1/chat/completions", chat_with({{"tools", Json::array({Json{{"type", "function"}, {"function", odd}}})},
                                                             {"tool_choice", "required"}}));
  CHECK(r.status == 400);
  CHECK_THAT(r.body["error"]["message"].get<std::string>(), Catch::Contains("parameter name"));
}

TEST_CASE("limits: /v1/models shows the served name, never a path", "[limits]") {
  TestServer srv;
  const auto r = srv.get("/v1/models");
  REQUIRE(r.status == 200);
  CHECK(r.body["data"][0]["root"] == "tiny-qwen35");
  CHECK(r.text.find("/tiny-qwen35") == std::string::npos);
}
