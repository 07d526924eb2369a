// The agent APIs end to end, in-process: POST /v1/messages (+ count_tokens) and
// POST /v1/responses on the bundled tiny model (their text equals what chat completions
// answers for the same conversation) and on a ScriptedModel (reasoning and a tool call,
// then the tool's result fed back), whole and streamed, and their errors in each API's shape.
#include <catch2/catch.hpp>

#include <map>

#include "tests/server/server_fixture.h"
#include "tests/server/sse_events.h"

using namespace ds::test;
using ds::server::dump_json;

namespace {

Json reference_chat_cases() { return load_reference()["chat"]; }

// The greedy 24-token chat completion of `messages`: what the agent APIs must say too.
Json chat_reply(const TestServer& srv, const Json& messages) {
  auto chat = srv.post("/v1/chat/completions", Json{{"messages", messages}, {"temperature", 0}, {"max_tokens", 24}});
  REQUIRE(chat.status == 200);
  return chat.body;
}

// A chat case's messages as an Anthropic request: the system message moves to `system`.
Json anthropic_body(const Json& messages, int max_tokens) {
  Json b = {{"model", "tiny-qwen35"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"messages", Json::array()}};
  for (const auto& m : messages) {
    if (m["role"] == "system")
      b["system"] = m["content"];
    else
      b["messages"].push_back(m);
  }
  return b;
}

TestServer::Reply post_with(const TestServer& srv, const std::string& path, const Json& body,
                            const httplib::Headers& headers) {
  httplib::Client c("127.0.0.1", srv.port());
  c.set_read_timeout(300, 0);
  auto r = c.Post(path, headers, dump_json(body), "application/json");
  TestServer::Reply out;
  if (!r) return out;
  out.status = r->status;
  out.text = r->body;
  out.body = Json::parse(r->body, nullptr, false);
  return out;
}

// The text of each content block kind, and the tool_use blocks, rebuilt from a Messages stream.
struct StreamedMessage {
  Json content = Json::array();
  Json stop_reason, stop_sequence, usage;
  std::vector<std::string> names;
};
StreamedMessage collect_messages_stream(const std::string& text) {
  StreamedMessage s;
  std::map<size_t, std::string> json_input;
  const auto events = parse_named_events(text);
  s.names = event_names(events);
  REQUIRE(!events.empty());
  CHECK(events.front().name == "message_start");
  CHECK(events.back().name == "message_stop");
  for (const auto& e : events) {
    const Json& d = e.data;
    if (e.name == "content_block_start") {
      CHECK(d["index"] == s.content.size());
      s.content.push_back(d["content_block"]);
    } else if (e.name == "content_block_delta") {
      const size_t i = d["index"];
      const Json& delta = d["delta"];
      if (delta["type"] == "text_delta") s.content[i]["text"] = s.content[i]["text"].get<std::string>() + delta["text"].get<std::string>();
      if (delta["type"] == "thinking_delta")
        s.content[i]["thinking"] = s.content[i]["thinking"].get<std::string>() + delta["thinking"].get<std::string>();
      if (delta["type"] == "input_json_delta") json_input[i] += delta["partial_json"].get<std::string>();
    } else if (e.name == "content_block_stop") {
      const size_t i = d["index"];
      if (json_input.count(i)) s.content[i]["input"] = Json::parse(json_input[i]);
    } else if (e.name == "message_delta") {
      s.stop_reason = d["delta"]["stop_reason"];
      s.stop_sequence = d["delta"]["stop_sequence"];
      s.usage = d["usage"];
    }
  }
  return s;
}

// A Responses stream: the final response, checked against the items rebuilt from the events.
Json collect_responses_stream(const std::string& text) {
  const auto events = parse_named_events(text);
  REQUIRE(events.size() >= 3);
  CHECK(events[0].name == "response.created");
  CHECK(events[1].name == "response.in_progress");
  Json items = Json::array();
  for (size_t i = 0; i < events.size(); ++i) {
    const Json& d = events[i].data;
    CHECK(d["sequence_number"] == i);
    if (events[i].name == "response.output_item.added") items.push_back(d["item"]);
    if (events[i].name == "response.content_part.added") items[d["output_index"].get<size_t>()]["content"].push_back(d["part"]);
    if (events[i].name == "response.output_text.delta" || events[i].name == "response.reasoning_text.delta") {
      Json& t = items[d["output_index"].get<size_t>()]["content"][d["content_index"].get<size_t>()]["text"];
      t = t.get<std::string>() + d["delta"].get<std::string>();
    }
    if (events[i].name == "response.function_call_arguments.delta") {
      Json& a = items[d["output_index"].get<size_t>()]["arguments"];
      a = a.get<std::string>() + d["delta"].get<std::string>();
    }
    if (events[i].name == "response.output_item.done") items[d["output_index"].get<size_t>()]["status"] = d["item"]["status"];
  }
  const std::string last = events.back().name;
  REQUIRE((last == "response.completed" || last == "response.incomplete" || last == "response.failed"));
  const Json response = events.back().data["response"];
  if (last != "response.failed") CHECK(items == response["output"]);
  return response;
}

// The text of a response's message items.
std::string output_text(const Json& response) {
  std::string t;
  for (const auto& item : response["output"])
    if (item["type"] == "message")
      for (const auto& part : item["content"]) t += part["text"].get<std::string>();
  return t;
}

const char* kWeatherScript =
    "<think>\nThe user wants the weather.\n</think>\n\nChecking.\n<tool_call>\n<function=get_weather>\n"
    "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>";

const char* kWeatherSchema = R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                                 "required": ["city"]})";

// The weather conversation after the tool ran ("sunny, 24 C"), as a chat request: what the
// agent APIs' second turn must render as. `tool_fields` adds to the function tool.
Json weather_follow_up_in_chat_form(const Json& call_id, const Json& arguments, const Json& tool_fields) {
  Json fn = {{"name", "get_weather"}, {"description", "Weather forecast"}, {"parameters", Json::parse(kWeatherSchema)}};
  for (const auto& [k, v] : tool_fields.items()) fn[k] = v;
  const Json call = {{"id", call_id}, {"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", arguments}}}};
  return Json{{"tools", Json::array({Json{{"type", "function"}, {"function", std::move(fn)}}})},
              {"messages", Json::array({Json{{"role", "user"}, {"content", "Weather in Paris?"}},
                                        Json{{"role", "assistant"}, {"content", "Checking.\n"},
                                             {"reasoning_content", "The user wants the weather.\n"},
                                             {"tool_calls", Json::array({call})}},
                                        Json{{"role", "tool"}, {"tool_call_id", call_id}, {"content", "sunny, 24 C"}}})}};
}

TestServerConfig scripted(const std::string& text) {
  TestServerConfig cfg;
  cfg.scripted = true;
  cfg.script = encode(text);
  return cfg;
}

}  // namespace

TEST_CASE("messages: a text reply, whole and streamed, is the chat completion's; count_tokens", "[messages]") {
  TestServer srv;
  for (const auto& c : reference_chat_cases()) {
    INFO(dump_json(c["messages"]));
    const Json chat = chat_reply(srv, c["messages"]);
    const Json& choice = chat["choices"][0];
    // Thinking enabled renders the prompt as chat completions do by default.
    Json b = anthropic_body(c["messages"], 24);
    b["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
    auto r = srv.post("/v1/messages", b);
    REQUIRE(r.status == 200);
    CHECK(r.body["type"] == "message");
    CHECK(r.body["role"] == "assistant");
    CHECK(r.body["model"] == "tiny-qwen35");
    CHECK(r.body["id"].get<std::string>().rfind("msg_", 0) == 0);
    const std::string text = choice["message"]["content"];
    if (text.empty())
      CHECK(r.body["content"].empty());
    else
      CHECK(r.body["content"] == Json::array({Json{{"type", "text"}, {"text", text}}}));
    CHECK(r.body["stop_reason"] == (choice["finish_reason"] == "length" ? "max_tokens" : "end_turn"));
    const Json& u = r.body["usage"];
    CHECK(u["input_tokens"].get<int64_t>() + u["cache_read_input_tokens"].get<int64_t>() == chat["usage"]["prompt_tokens"]);
    CHECK(u["output_tokens"] == chat["usage"]["completion_tokens"]);

    b["stream"] = true;
    auto s = srv.post("/v1/messages", b);
    REQUIRE(s.status == 200);
    const auto got = collect_messages_stream(s.text);
    CHECK(got.content == r.body["content"]);
    CHECK(got.stop_reason == r.body["stop_reason"]);
    CHECK(got.usage["output_tokens"] == u["output_tokens"]);

    b.erase("stream");
    b.erase("max_tokens");
    auto n = srv.post("/v1/messages/count_tokens", b);
    REQUIRE(n.status == 200);
    CHECK(n.body == Json{{"input_tokens", chat["usage"]["prompt_tokens"]}});
  }
  // Without `thinking` the reply is asked for with thinking off: the template's empty block
  // makes the prompt longer.
  Json plain = anthropic_body(reference_chat_cases()[0]["messages"], 4);
  plain.erase("max_tokens");
  Json thinking = plain;
  thinking["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
  CHECK(srv.post("/v1/messages/count_tokens", plain).body["input_tokens"] >
        srv.post("/v1/messages/count_tokens", thinking).body["input_tokens"]);
  CHECK(srv.wait_pools_free());
}

TEST_CASE("messages: thinking and a tool call, then the tool's result fed back", "[messages]") {
  TestServer srv(scripted(kWeatherScript));
  const Json tools = Json::array({Json{{"name", "get_weather"}, {"description", "Weather forecast"},
                                       {"input_schema", Json::parse(kWeatherSchema)}}});
  Json b = {{"model", "tiny-qwen35"}, {"max_tokens", 200}, {"tools", tools}, {"thinking", {{"type", "enabled"}}},
            {"messages", Json::array({Json{{"role", "user"}, {"content", "Weather in Paris?"}}})}};
  auto r = srv.post("/v1/messages", b);
  REQUIRE(r.status == 200);
  CHECK(r.body["stop_reason"] == "tool_use");
  const Json& content = r.body["content"];
  REQUIRE(content.size() == 3);
  CHECK(content[0] == Json::parse(R"({"type": "thinking", "thinking": "The user wants the weather.\n", "signature": ""})"));
  CHECK(content[1] == Json::parse(R"({"type": "text", "text": "Checking.\n"})"));
  CHECK(content[2]["type"] == "tool_use");
  CHECK(content[2]["id"].get<std::string>().rfind("toolu_", 0) == 0);
  CHECK(content[2]["name"] == "get_weather");
  CHECK(content[2]["input"] == Json::parse(R"({"city": "Paris", "days": 2})"));

  b["stream"] = true;
  auto s = srv.post("/v1/messages", b);
  REQUIRE(s.status == 200);
  const auto got = collect_messages_stream(s.text);
  CHECK(got.stop_reason == "tool_use");
  REQUIRE(got.content.size() == 3);
  CHECK(got.content[0] == content[0]);
  CHECK(got.content[1] == content[1]);
  CHECK(got.content[2]["input"] == content[2]["input"]);
  CHECK(got.content[2]["id"] != content[2]["id"]);  // a new call, a new id

  // The tool's result goes back as the client sends it: the assistant turn as returned, then a
  // user turn with the tool_result. It renders as the same conversation in chat form does.
  Json follow = b;
  follow.erase("stream");
  follow["messages"].push_back(Json{{"role", "assistant"}, {"content", content}});
  follow["messages"].push_back(Json{{"role", "user"}, {"content", Json::array({Json{{"type", "tool_result"},
                                                                                  {"tool_use_id", content[2]["id"]},
                                                                                  {"content", "sunny, 24 C"}}})}});
  auto r2 = srv.post("/v1/messages", follow);
  REQUIRE(r2.status == 200);
  Json chat_form = weather_follow_up_in_chat_form(content[2]["id"], content[2]["input"], Json::object());
  chat_form["chat_template_kwargs"] = {{"enable_thinking", true}};
  auto tok = srv.post("/tokenize", chat_form);
  REQUIRE(tok.status == 200);
  const Json& u = r2.body["usage"];
  CHECK(u["input_tokens"].get<int64_t>() + u["cache_read_input_tokens"].get<int64_t>() == tok.body["count"]);
  follow.erase("max_tokens");
  CHECK(srv.post("/v1/messages/count_tokens", follow).body["input_tokens"] == tok.body["count"]);
  const std::string rendered = srv.tokenizer().decode(tok.body["tokens"].get<std::vector<int32_t>>(), false);
  CHECK(rendered.find("<tool_response>\nsunny, 24 C\n</tool_response>") != std::string::npos);
  CHECK(srv.wait_pools_free());
}

TEST_CASE("messages: end_turn and stop sequences", "[messages]") {
  TestServer srv(scripted("Hello world. Bye"));
  Json b = {{"max_tokens", 50}, {"messages", Json::array({Json{{"role", "user"}, {"content", "hi"}}})}};
  auto r = srv.post("/v1/messages", b);
  REQUIRE(r.status == 200);
  CHECK(r.body["stop_reason"] == "end_turn");
  CHECK(r.body["content"][0]["text"] == "Hello world. Bye");
  b["stop_sequences"] = Json::array({"world"});
  for (const bool stream : {false, true}) {
    b["stream"] = stream;
    auto s = srv.post("/v1/messages", b);
    REQUIRE(s.status == 200);
    if (stream) {
      const auto got = collect_messages_stream(s.text);
      CHECK(got.stop_reason == "stop_sequence");
      CHECK(got.stop_sequence == "world");
      CHECK(got.content[0]["text"] == "Hello ");
    } else {
      CHECK(s.body["stop_reason"] == "stop_sequence");
      CHECK(s.body["stop_sequence"] == "world");
      CHECK(s.body["content"][0]["text"] == "Hello ");
    }
  }
  CHECK(srv.wait_pools_free());
}

TEST_CASE("messages: errors are Anthropic error objects; x-api-key or Bearer", "[messages]") {
  TestServerConfig cfg = scripted("ok");
  cfg.api_key = "sekrit";
  cfg.engine.max_ctx = 256;
  TestServer srv(cfg);
  const Json hi = Json::array({Json{{"role", "user"}, {"content", "hi"}}});
  const Json ok = {{"model", "tiny-qwen35"}, {"max_tokens", 4}, {"messages", hi}};
  auto expect = [](const TestServer::Reply& r, int status, const std::string& type, const std::string& says = {}) {
    CHECK(r.status == status);
    REQUIRE(r.body.is_object());
    CHECK(r.body["type"] == "error");
    CHECK(r.body["error"]["type"] == type);
    REQUIRE(r.body["error"]["message"].is_string());
    if (!says.empty()) CHECK(r.body["error"]["message"].get<std::string>().find(says) != std::string::npos);
  };
  // The key: x-api-key (ANTHROPIC_API_KEY) or Bearer (ANTHROPIC_AUTH_TOKEN); nothing else.
  const httplib::Headers anthropic = {{"x-api-key", "sekrit"}, {"anthropic-version", "2023-06-01"}};
  CHECK(post_with(srv, "/v1/messages", ok, anthropic).status == 200);
  CHECK(post_with(srv, "/v1/messages", ok, {{"Authorization", "Bearer sekrit"}}).status == 200);
  expect(post_with(srv, "/v1/messages", ok, {{"x-api-key", "sekrix"}}), 401, "authentication_error");
  expect(post_with(srv, "/v1/messages", ok, {}), 401, "authentication_error");
  CHECK(post_with(srv, "/v1/chat/completions", Json{{"messages", hi}, {"max_tokens", 2}}, anthropic).status == 200);
  // Requests it refuses.
  Json b = ok;
  b.erase("max_tokens");
  expect(srv.post("/v1/messages", b), 400, "invalid_request_error", "max_tokens");
  b = ok;
  b["tools"] = Json::array({Json{{"name", "f"}, {"input_schema", {{"type", "object"}}}}});
  // A forced tool call samples under the tool-call grammar (structured outputs).
  for (const Json& tc : {Json{{"type", "any"}}, Json{{"type", "tool"}, {"name", "f"}}, Json{{"type", "auto"}}}) {
    b["tool_choice"] = tc;
    CHECK(srv.post("/v1/messages", b).status == 200);
  }
  b["tool_choice"] = {{"type", "tool"}, {"name", "g"}};
  expect(srv.post("/v1/messages", b), 400, "invalid_request_error", "g");
  b["tool_choice"] = {{"type", "sometimes"}};
  expect(srv.post("/v1/messages", b), 400, "invalid_request_error", "tool_choice");
  b = ok;
  b["stop_sequences"] = Json::array({""});
  expect(srv.post("/v1/messages", b), 400, "invalid_request_error", "'stop_sequences'");
  b = ok;
  b["messages"][0]["content"] = Json::array({Json{{"type", "image"}, {"source", {{"type", "url"}, {"url", "x"}}}}});
  expect(srv.post("/v1/messages", b), 400, "invalid_request_error", "image");
  b = ok;
  b["model"] = "claude-opus-4";
  expect(srv.post("/v1/messages", b), 404, "not_found_error", "claude-opus-4");
  b = ok;
  b["max_tokens"] = 300;  // beyond the 256-token context
  expect(srv.post("/v1/messages", b), 400, "invalid_request_error", "lower max_tokens");
  expect(srv.post_raw("/v1/messages", "{nope"), 400, "invalid_request_error");
  expect(srv.get("/v1/messages"), 405, "invalid_request_error");
  expect(srv.post("/v1/messages/nothing", ok), 404, "not_found_error");
  // The engine fails: 500 api_error whole, an error event in a stream.
  srv.scripted()->set_fail(true);
  expect(srv.post("/v1/messages", ok), 500, "api_error");
  Json st = ok;
  st["stream"] = true;
  auto s = srv.post("/v1/messages", st);
  CHECK(s.status == 200);
  const auto events = parse_named_events(s.text);
  REQUIRE(!events.empty());
  CHECK(events.front().name == "message_start");
  CHECK(events.back().name == "error");
  CHECK(events.back().data["error"]["type"] == "api_error");
  CHECK(srv.wait_pools_free());
  // Other routes keep OpenAI's shape.
  CHECK(srv.post("/v1/chat/completions", Json{{"messages", "x"}}).body["error"]["type"] == "invalid_request_error");
}

TEST_CASE("messages: while loading, 503 overloaded_error", "[messages]") {
  TestServerConfig cfg = scripted("ok");
  cfg.ready = false;
  TestServer srv(cfg);
  auto r = srv.post("/v1/messages", Json{{"max_tokens", 2}, {"messages", Json::array({Json{{"role", "user"}, {"content", "hi"}}})}});
  CHECK(r.status == 503);
  CHECK(r.body["error"]["type"] == "overloaded_error");
}

TEST_CASE("messages: a streaming client that disconnects cancels its request", "[messages]") {
  TestServerConfig cfg = scripted("the quick brown fox jumps over the lazy dog ");
  cfg.step_delay_ms = 10;
  cfg.engine.max_ctx = 4096;
  TestServer srv(cfg);
  RawClient raw(srv.port());
  REQUIRE(raw.ok());
  Json b = {{"max_tokens", 3000}, {"stream", true}, {"messages", Json::array({Json{{"role", "user"}, {"content", "go"}}})}};
  REQUIRE(raw.send_post("/v1/messages", dump_json(b)));
  REQUIRE(raw.read_until("content_block_delta", std::chrono::seconds(20)).find("content_block_delta") != std::string::npos);
  const auto before = srv.engine().stats();
  raw.close();
  REQUIRE(srv.wait_pools_free(std::chrono::seconds(10)));
  CHECK(srv.engine().stats().requests_cancelled_total == before.requests_cancelled_total + 1);
}

TEST_CASE("responses: a text reply, whole and streamed, is the chat completion's", "[responses]") {
  TestServer srv;
  for (const auto& c : reference_chat_cases()) {
    INFO(dump_json(c["messages"]));
    const Json chat = chat_reply(srv, c["messages"]);
    const Json& choice = chat["choices"][0];
    Json b = {{"model", "tiny-qwen35"}, {"input", c["messages"]}, {"temperature", 0}, {"max_output_tokens", 24}};
    auto r = srv.post("/v1/responses", b);
    REQUIRE(r.status == 200);
    CHECK(r.body["object"] == "response");
    CHECK(r.body["id"].get<std::string>().rfind("resp_", 0) == 0);
    CHECK(output_text(r.body) == choice["message"]["content"]);
    const bool length = choice["finish_reason"] == "length";
    CHECK(r.body["status"] == (length ? "incomplete" : "completed"));
    if (length) CHECK(r.body["incomplete_details"]["reason"] == "max_output_tokens");
    CHECK(r.body["usage"]["input_tokens"] == chat["usage"]["prompt_tokens"]);
    CHECK(r.body["usage"]["output_tokens"] == chat["usage"]["completion_tokens"]);
    CHECK(r.body["max_output_tokens"] == 24);
    CHECK(r.body["temperature"] == 0.0);
    CHECK(r.body["store"] == false);

    b["stream"] = true;
    auto s = srv.post("/v1/responses", b);
    REQUIRE(s.status == 200);
    const Json streamed = collect_responses_stream(s.text);
    CHECK(output_text(streamed) == output_text(r.body));
    CHECK(streamed["status"] == r.body["status"]);
    CHECK(streamed["usage"]["output_tokens"] == r.body["usage"]["output_tokens"]);
  }
  // A string input with instructions is a system and a user message.
  auto r = srv.post("/v1/responses", Json{{"input", "Hello"}, {"instructions", "Be terse."}, {"max_output_tokens", 2}});
  REQUIRE(r.status == 200);
  auto t = srv.post("/tokenize", Json{{"messages", Json::parse(R"([{"role": "system", "content": "Be terse."},
                                                                  {"role": "user", "content": "Hello"}])")}});
  CHECK(r.body["usage"]["input_tokens"] == t.body["count"]);
  CHECK(r.body["instructions"] == "Be terse.");
  CHECK(srv.wait_pools_free());
}

TEST_CASE("responses: reasoning, a function call, then its output fed back", "[responses]") {
  TestServer srv(scripted(kWeatherScript));
  const Json tools = Json::array({Json{{"type", "function"}, {"name", "get_weather"}, {"description", "Weather forecast"},
                                       {"parameters", Json::parse(kWeatherSchema)}, {"strict", false}}});
  const Json question = Json::array({Json{{"role", "user"}, {"content", "Weather in Paris?"}}});
  Json b = {{"model", "tiny-qwen35"}, {"max_output_tokens", 200}, {"tools", tools}, {"input", question},
            {"reasoning", {{"effort", "medium"}}}};
  auto r = srv.post("/v1/responses", b);
  REQUIRE(r.status == 200);
  CHECK(r.body["status"] == "completed");
  CHECK(r.body["tools"] == tools);
  const Json& out = r.body["output"];
  REQUIRE(out.size() == 3);
  CHECK(out[0]["type"] == "reasoning");
  CHECK(out[0]["content"][0]["text"] == "The user wants the weather.\n");
  CHECK(out[1]["type"] == "message");
  CHECK(out[1]["content"][0]["text"] == "Checking.\n");
  CHECK(out[2]["type"] == "function_call");
  CHECK(out[2]["name"] == "get_weather");
  CHECK(out[2]["call_id"].get<std::string>().rfind("call_", 0) == 0);
  CHECK(Json::parse(out[2]["arguments"].get<std::string>()) == Json::parse(R"({"city": "Paris", "days": 2})"));
  const Json& u = r.body["usage"];
  const int64_t reasoning = u["output_tokens_details"]["reasoning_tokens"];
  // The tokens between "<think>" and "</think>" (an added token each, neither counted).
  CHECK(reasoning == static_cast<int64_t>(encode("\nThe user wants the weather.\n").size()));
  CHECK(reasoning < u["output_tokens"].get<int64_t>());

  b["stream"] = true;
  auto s = srv.post("/v1/responses", b);
  REQUIRE(s.status == 200);
  const Json streamed = collect_responses_stream(s.text);
  REQUIRE(streamed["output"].size() == 3);
  CHECK(streamed["output"][2]["arguments"] == out[2]["arguments"]);
  CHECK(streamed["output"][0]["content"] == out[0]["content"]);

  // The client sends the output items back with the function's output.
  Json follow = {{"tools", tools}, {"max_output_tokens", 4}, {"input", question}};
  for (const auto& item : out) follow["input"].push_back(item);
  follow["input"].push_back(Json{{"type", "function_call_output"}, {"call_id", out[2]["call_id"]}, {"output", "sunny, 24 C"}});
  auto r2 = srv.post("/v1/responses", follow);
  REQUIRE(r2.status == 200);
  // The Responses tool's strict flag reaches the template as a chat tool's would.
  auto tok = srv.post("/tokenize", weather_follow_up_in_chat_form(out[2]["call_id"], out[2]["arguments"], {{"strict", false}}));
  REQUIRE(tok.status == 200);
  CHECK(r2.body["usage"]["input_tokens"] == tok.body["count"]);
  CHECK(srv.wait_pools_free());
}

TEST_CASE("responses: errors are OpenAI error objects naming the Responses fields", "[responses]") {
  TestServerConfig cfg = scripted("ok");
  cfg.engine.max_ctx = 64;
  TestServer srv(cfg);
  auto expect = [](const TestServer::Reply& r, int status, const std::string& param) {
    CHECK(r.status == status);
    REQUIRE(r.body.contains("error"));
    CHECK(r.body["error"]["param"] == param);
    CHECK(r.body["error"]["message"].get<std::string>().find(param) != std::string::npos);
  };
  const Json ok = {{"input", "hi"}, {"max_output_tokens", 2}};
  CHECK(srv.post("/v1/responses", ok).status == 200);
  Json b = ok;
  b["store"] = true;
  expect(srv.post("/v1/responses", b), 400, "store");
  b = ok;
  b["previous_response_id"] = "resp_123";
  expect(srv.post("/v1/responses", b), 400, "previous_response_id");
  b = ok;
  b["tool_choice"] = {{"type", "web_search"}};
  expect(srv.post("/v1/responses", b), 400, "tool_choice");
  b = ok;
  // text.format becomes the chat response_format (structured outputs).
  b["text"] = {{"format", {{"type", "json_object"}}}};
  CHECK(srv.post("/v1/responses", b).status == 200);
  b["text"] = {{"format", {{"type", "xml"}}}};
  expect(srv.post("/v1/responses", b), 400, "text.format");
  b = ok;
  b["max_output_tokens"] = 100;  // beyond the 64-token context
  expect(srv.post("/v1/responses", b), 400, "max_output_tokens");
  b = ok;
  b["temperature"] = -1;
  expect(srv.post("/v1/responses", b), 400, "temperature");
  b = ok;
  b["model"] = "gpt-5";
  CHECK(srv.post("/v1/responses", b).status == 404);
  // The engine fails: 500 whole, response.failed in a stream.
  srv.scripted()->set_fail(true);
  CHECK(srv.post("/v1/responses", ok).body["error"]["type"] == "server_error");
  b = ok;
  b["stream"] = true;
  auto s = srv.post("/v1/responses", b);
  CHECK(s.status == 200);
  const Json failed = collect_responses_stream(s.text);
  CHECK(failed["status"] == "failed");
  CHECK(failed["error"]["code"] == "server_error");
  CHECK(srv.wait_pools_free());
}
