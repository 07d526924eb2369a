// The Anthropic Messages and OpenAI Responses APIs without a server: their requests as the
// chat bodies the pipeline runs (messages_request.h, responses_request.h), and their replies
// built from ChoiceDeltas (reply_parts.h, messages_reply.h, responses_reply.h), whole and as
// stream events, which must carry the same parts.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/chat_messages.h"
#include "server/messages_reply.h"
#include "server/messages_request.h"
#include "server/responses_reply.h"
#include "server/responses_request.h"
#include "tests/server/sse_events.h"

using namespace ds::server;
using ds::test::event_names;
using ds::test::parse_named_events;

namespace {

// The field a refusal names ("" when accepted); fn throws ApiError.
template <class Fn>
std::string refused(Fn&& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    REQUIRE(e.status() == 400);
    return e.param().empty() ? "?" : e.param();
  }
  return {};
}

std::string messages_refusal(const char* body, MessagesEndpoint ep = MessagesEndpoint::create) {
  return refused([&] { messages_to_chat_body(Json::parse(body), ep); });
}

std::string responses_refusal(const char* body) {
  return refused([&] { parse_responses_request(Json::parse(body)); });
}

ToolCallDelta call_opens(int index, std::string id, std::string name) {
  ToolCallDelta d;
  d.index = index;
  d.opens = true;
  d.id = std::move(id);
  d.name = std::move(name);
  return d;
}

ToolCallDelta call_args(int index, std::string args) {
  ToolCallDelta d;
  d.index = index;
  d.arguments = std::move(args);
  return d;
}

// A reply as the pipeline hands it over: reasoning in two pieces, reasoning and text in one
// delta, then two tool calls whose arguments arrive in fragments.
std::vector<ChoiceDelta> sample_deltas() {
  std::vector<ChoiceDelta> v(5);
  v[0].reasoning = "Think";
  v[1].reasoning = "ing.";
  v[1].content = "Checking.";
  v[2].tool_calls = {call_opens(0, "call_A1", "get_weather"), call_args(0, "{\"city\":")};
  v[3].tool_calls = {call_args(0, "\"Paris\"}"), call_opens(1, "call_B2", "get_time"), call_args(1, "{}")};
  return v;  // v[4]: an empty delta (a finishing update carries none)
}

}  // namespace

TEST_CASE("messages request: Anthropic content blocks become chat messages", "[agent]") {
  const Json chat = messages_to_chat_body(Json::parse(R"({
    "model": "m", "max_tokens": 64, "temperature": 0.2, "top_k": 5, "stop_sequences": ["END"], "stream": true,
    "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools.", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "auto"},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "Weather"}, {"type": "text", "text": "in Paris?"}]},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "Need a tool.", "signature": ""},
        {"type": "redacted_thinking", "data": "xx"}, {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "timeout", "is_error": true},
        {"type": "text", "text": "Thanks"}]}]})"),
                                          MessagesEndpoint::create);
  const Json expected = Json::parse(R"([
    {"role": "system", "content": "Be brief.\nUse tools."},
    {"role": "user", "content": "Weather\nin Paris?"},
    {"role": "assistant", "content": "Checking.", "reasoning_content": "Need a tool.",
     "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: timeout"},
    {"role": "user", "content": "Thanks"}])");
  CHECK(chat["messages"] == expected);
  CHECK(chat["tools"] == Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
                                         "description": "Weather", "parameters": {"type": "object"}}}])"));
  CHECK(chat["tool_choice"] == "auto");
  CHECK(chat["chat_template_kwargs"] == Json{{"enable_thinking", true}});
  CHECK(chat["max_tokens"] == 64);
  CHECK(chat["temperature"] == 0.2);
  CHECK(chat["top_k"] == 5);
  CHECK(chat["stop"] == Json::array({"END"}));
  CHECK(chat["stream"] == true);
  // What the chat side makes of it: the same messages, in template form.
  const ChatFields f = parse_chat_fields(chat);
  CHECK(f.parse_tool_calls);
  CHECK(f.messages.size() == expected.size());

  // Thinking: off unless enabled (Anthropic's default); chat_template_kwargs wins.
  const char* base = R"({"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})";
  CHECK(messages_to_chat_body(Json::parse(base), MessagesEndpoint::create)["chat_template_kwargs"]["enable_thinking"] == false);
  Json b = Json::parse(base);
  b["thinking"] = {{"type", "adaptive"}};
  CHECK(messages_to_chat_body(b, MessagesEndpoint::create)["chat_template_kwargs"]["enable_thinking"] == true);
  b["chat_template_kwargs"] = {{"enable_thinking", false}};
  CHECK(messages_to_chat_body(b, MessagesEndpoint::create)["chat_template_kwargs"]["enable_thinking"] == false);
  // tool_choice: any -> required, tool -> a named function (refused later, by the chat fields).
  b["tool_choice"] = {{"type", "any"}};
  CHECK(messages_to_chat_body(b, MessagesEndpoint::create)["tool_choice"] == "required");
  b["tool_choice"] = {{"type", "tool"}, {"name", "f"}};
  CHECK(messages_to_chat_body(b, MessagesEndpoint::create)["tool_choice"] ==
        Json::parse(R"({"type": "function", "function": {"name": "f"}})"));
  // count_tokens needs no max_tokens.
  CHECK(messages_refusal(R"({"messages": [{"role": "user", "content": "hi"}]})", MessagesEndpoint::count_tokens).empty());
}

TEST_CASE("messages request: what is refused, by name", "[agent]") {
  CHECK(messages_refusal(R"({"messages": [{"role": "user", "content": "hi"}]})") == "max_tokens");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": []})") == "messages");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "system", "content": "x"}]})") == "messages[0].role");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "AA=="}}]}]})") ==
        "messages[0].content[0].source.media_type");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "file", "file_id": "f"}}]}]})") == "messages[0].content[0].source.type");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "text", "data": "x"}}]}]})") == "messages[0].content[0].type");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "a"},
        {"role": "assistant", "content": "prefill"}]})") == "messages");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "a"}],
        "tools": [{"type": "web_search_20250305", "name": "web_search"}]})") == "tools[0].type");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "a"}],
        "tools": [{"name": "f"}]})") == "tools[0].input_schema");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "a"}],
        "tool_choice": {"type": "maybe"}})") == "tool_choice.type");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "a"}],
        "thinking": {"type": "enabled", "budget_tokens": 0}})") == "thinking.budget_tokens");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": "x"}]}, {"role": "user", "content": "a"}]})") ==
        "messages[0].content[0].input");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "a"}], "mcp_servers": [{}]})") ==
        "mcp_servers");
  // Fields of the wrong type where only a value is tested are 400s naming a field, not 500s
  // (json's value(key, "") throws on them: fuzz_request_json, 2026-12-07).
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": ["x"]}]}]})") ==
        "messages[0].content[0].type");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "a"}], "thinking": "on"})") ==
        "thinking");
  CHECK(messages_refusal(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "tool_result",
        "tool_use_id": "t", "content": [{"type": 7, "text": "x"}]}]}]})") != "");
}

TEST_CASE("responses request: input items become chat messages", "[agent]") {
  const ResponsesRequest r = parse_responses_request(Json::parse(R"({
    "model": "m", "instructions": "Be brief.", "max_output_tokens": 100, "temperature": 0.3, "top_p": 0.9,
    "stream": true, "store": false, "include": ["reasoning.encrypted_content"], "parallel_tool_calls": false,
    "reasoning": {"effort": "low", "summary": "auto"},
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather", "parameters": {"type": "object"}, "strict": true}],
    "tool_choice": "auto",
    "input": [
      {"type": "message", "role": "developer", "content": "Use tools."},
      {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "short"}],
       "content": [{"type": "reasoning_text", "text": "Need a tool."}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Done."}]},
      {"type": "message", "role": "assistant", "content": "It is sunny."},
      {"role": "system", "content": "Late rule."},
      {"role": "user", "content": "Thanks"}]})"));
  const Json expected = Json::parse(R"([
    {"role": "system", "content": "Be brief.\n\nUse tools."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "Checking.", "reasoning_content": "Need a tool.",
     "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "assistant", "content": "It is sunny.", "reasoning_content": "Done."},
    {"role": "system", "content": "Late rule."},
    {"role": "user", "content": "Thanks"}])");
  const Json& chat = r.chat_body;
  CHECK(chat["messages"] == expected);
  CHECK(chat["tools"] == Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
                                         "description": "Weather", "parameters": {"type": "object"}, "strict": true}}])"));
  CHECK(chat["max_tokens"] == 100);
  CHECK(chat["chat_template_kwargs"] == Json{{"enable_thinking", true}});
  CHECK(chat["temperature"] == 0.3);
  CHECK(chat["stream"] == true);
  CHECK(r.settings["parallel_tool_calls"] == false);
  CHECK(r.settings["reasoning"] == Json::parse(R"({"effort": "low", "summary": "auto"})"));
  CHECK(r.settings["instructions"] == "Be brief.");
  CHECK(r.settings["tools"][0]["name"] == "get_weather");
  CHECK(parse_chat_fields(chat).messages.size() == expected.size());

  // A string input; effort none turns thinking off; no reasoning leaves the template's default.
  auto one = parse_responses_request(Json::parse(R"({"input": "hi", "reasoning": {"effort": "none"}})"));
  CHECK(one.chat_body["messages"] == Json::parse(R"([{"role": "user", "content": "hi"}])"));
  CHECK(one.chat_body["chat_template_kwargs"]["enable_thinking"] == false);
  CHECK_FALSE(parse_responses_request(Json::parse(R"({"input": "hi"})")).chat_body.contains("chat_template_kwargs"));
  // text.format and tool_choice in chat terms (the chat side compiles their grammars).
  auto fmt = parse_responses_request(Json::parse(R"({"input": "hi", "tool_choice": {"type": "function", "name": "f"},
      "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}, "strict": true}}})"));
  CHECK(fmt.chat_body["response_format"] ==
        Json::parse(R"({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}, "strict": true}})"));
  CHECK(fmt.chat_body["tool_choice"] == Json::parse(R"({"type": "function", "function": {"name": "f"}})"));
}

TEST_CASE("responses request: what is refused, by name", "[agent]") {
  CHECK(responses_refusal(R"({"input": "hi", "store": false})").empty());
  CHECK(responses_refusal(R"({"input": "hi", "store": true})") == "store");
  CHECK(responses_refusal(R"({"input": "hi", "previous_response_id": "resp_1"})") == "previous_response_id");
  CHECK(responses_refusal(R"({"input": "hi", "background": true})") == "background");
  CHECK(responses_refusal(R"({"input": "hi", "truncation": "auto"})") == "truncation");
  CHECK(responses_refusal(R"({"input": "hi", "include": ["message.output_text.logprobs"]})") == "include");
  CHECK(responses_refusal(R"({"model": "m"})") == "input");
  CHECK(responses_refusal(R"({"input": []})") == "input");
  CHECK(responses_refusal(R"({"input": "hi", "max_output_tokens": 0})") == "max_output_tokens");
  CHECK(responses_refusal(R"({"input": [{"type": "item_reference", "id": "msg_1"}]})") == "input[0].type");
  CHECK(responses_refusal(R"({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]})") ==
        "input[0].content[0].file_id");
  CHECK(responses_refusal(R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"},
        {"type": "input_file", "file_id": "f"}]}]})") == "input[0].content[1].type");
  CHECK(responses_refusal(R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{bad"}]})") ==
        "input[0].arguments");
  CHECK(responses_refusal(R"({"input": "hi", "tools": [{"type": "web_search"}]})") == "tools[0].type");
  CHECK(responses_refusal(R"({"input": "hi", "tool_choice": "sometimes"})") == "tool_choice");
  CHECK(responses_refusal(R"({"input": "hi", "reasoning": {"effort": "max"}})") == "reasoning.effort");
  CHECK(responses_refusal(R"({"input": [{"role": "user", "content": [{"type": {"a": 1}}]}]})") ==
        "input[0].content[0].type");
}

TEST_CASE("messages reply: content blocks whole and streamed agree", "[agent]") {
  for (const bool stream : {false, true}) {
    MessageWriter w("msg_1", "m", stream);
    std::string text = w.start(Usage{20, 0, std::nullopt});
    for (const auto& d : sample_deltas()) text += w.add(d);
    text += w.finish("tool_calls", nullptr, Usage{20, 9, 12});
    const Json& msg = w.message();
    CHECK(msg["stop_reason"] == "tool_use");
    CHECK(msg["stop_sequence"].is_null());
    CHECK(msg["usage"] == Json::parse(R"({"input_tokens": 8, "cache_creation_input_tokens": 0,
                                          "cache_read_input_tokens": 12, "output_tokens": 9})"));
    CHECK(msg["content"] == Json::parse(R"([
      {"type": "thinking", "thinking": "Thinking.", "signature": ""},
      {"type": "text", "text": "Checking."},
      {"type": "tool_use", "id": "toolu_A1", "name": "get_weather", "input": {"city": "Paris"}},
      {"type": "tool_use", "id": "toolu_B2", "name": "get_time", "input": {}}])"));
    if (!stream) {
      CHECK(text.empty());
      continue;
    }
    const auto events = parse_named_events(text);
    CHECK(event_names(events) == std::vector<std::string>{
                               "message_start", "content_block_start", "content_block_delta", "content_block_delta",
                               "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop",
                               "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
                               "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
                               "message_stop"});
    CHECK(events[0].data["message"]["content"].empty());
    CHECK(events[0].data["message"]["usage"]["input_tokens"] == 20);
    // The blocks rebuilt from the events, as an SDK does, equal the whole message's.
    Json blocks = Json::array();
    std::vector<std::string> json_input(8);
    for (const auto& e : events) {
      if (e.name == "content_block_start") {
        CHECK(e.data["index"] == blocks.size());
        blocks.push_back(e.data["content_block"]);
      } else if (e.name == "content_block_delta") {
        const size_t i = e.data["index"];
        const Json& d = e.data["delta"];
        if (d["type"] == "text_delta") blocks[i]["text"] = blocks[i]["text"].get<std::string>() + d["text"].get<std::string>();
        if (d["type"] == "thinking_delta")
          blocks[i]["thinking"] = blocks[i]["thinking"].get<std::string>() + d["thinking"].get<std::string>();
        if (d["type"] == "input_json_delta") json_input[i] += d["partial_json"].get<std::string>();
      } else if (e.name == "content_block_stop") {
        const size_t i = e.data["index"];
        if (!json_input[i].empty()) blocks[i]["input"] = Json::parse(json_input[i]);
      }
    }
    CHECK(blocks == msg["content"]);
    CHECK(events[15].data["delta"] == Json::parse(R"({"stop_reason": "tool_use", "stop_sequence": null})"));
    CHECK(events[15].data["usage"] == msg["usage"]);
  }
  // Stop reasons: the model's end, the length, a stop sequence.
  auto reason = [](const std::string& finish, const Json& stop) {
    MessageWriter w("msg_1", "m", false);
    w.finish(finish, stop, Usage{});
    return w.message()["stop_reason"].get<std::string>() + "/" + w.message()["stop_sequence"].dump();
  };
  CHECK(reason("stop", nullptr) == "end_turn/null");
  CHECK(reason("stop", 1006) == "end_turn/null");
  CHECK(reason("length", nullptr) == "max_tokens/null");
  CHECK(reason("stop", "END") == "stop_sequence/\"END\"");
  CHECK(messages_error_event(internal_error("boom")) ==
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"boom\"}}\n\n");
}

TEST_CASE("responses reply: output items whole and streamed agree", "[agent]") {
  const Json settings = {{"instructions", "x"}, {"tools", Json::array()}, {"tool_choice", "auto"}};
  for (const bool stream : {false, true}) {
    ResponseWriter w("resp_1", 1700000000, "m", settings, 0.7, 1.0, stream);
    std::string text = w.start();
    for (const auto& d : sample_deltas()) text += w.add(d);
    text += w.finish("tool_calls", Usage{20, 9, 12}, 3);
    const Json& r = w.response();
    CHECK(r["status"] == "completed");
    CHECK(r["incomplete_details"].is_null());
    CHECK(r["instructions"] == "x");
    CHECK(r["temperature"] == 0.7);
    CHECK(r["usage"] == Json::parse(R"({"input_tokens": 20, "input_tokens_details": {"cached_tokens": 12},
        "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 3}, "total_tokens": 29})"));
    const Json& out = r["output"];
    REQUIRE(out.size() == 4);
    CHECK(out[0]["type"] == "reasoning");
    CHECK(out[0]["content"] == Json::parse(R"([{"type": "reasoning_text", "text": "Thinking."}])"));
    CHECK(out[1]["type"] == "message");
    CHECK(out[1]["role"] == "assistant");
    CHECK(out[1]["content"] == Json::parse(R"([{"type": "output_text", "text": "Checking.", "annotations": []}])"));
    CHECK(out[2]["type"] == "function_call");
    CHECK(out[2]["id"] == "fc_A1");
    CHECK(out[2]["call_id"] == "call_A1");
    CHECK(out[2]["name"] == "get_weather");
    CHECK(out[2]["arguments"] == "{\"city\":\"Paris\"}");
    CHECK(out[3]["arguments"] == "{}");
    for (const auto& item : out) CHECK(item["status"] == "completed");
    if (!stream) {
      CHECK(text.empty());
      continue;
    }
    const auto events = parse_named_events(text);
    for (size_t i = 0; i < events.size(); ++i) CHECK(events[i].data["sequence_number"] == i);
    CHECK(events.front().name == "response.created");
    CHECK(events.front().data["response"]["status"] == "in_progress");
    CHECK(events.back().name == "response.completed");
    CHECK(events.back().data["response"] == r);
    // The items rebuilt from the events equal the final ones.
    Json items = Json::array();
    for (const auto& e : events) {
      const Json& d = e.data;
      if (e.name == "response.output_item.added") {
        CHECK(d["output_index"] == items.size());
        items.push_back(d["item"]);
      } else if (e.name == "response.content_part.added") {
        CHECK(d["item_id"] == items[d["output_index"].get<size_t>()]["id"]);
        items[d["output_index"].get<size_t>()]["content"].push_back(d["part"]);
      } else if (e.name == "response.output_text.delta" || e.name == "response.reasoning_text.delta") {
        Json& t = items[d["output_index"].get<size_t>()]["content"][d["content_index"].get<size_t>()]["text"];
        t = t.get<std::string>() + d["delta"].get<std::string>();
      } else if (e.name == "response.function_call_arguments.delta") {
        Json& a = items[d["output_index"].get<size_t>()]["arguments"];
        a = a.get<std::string>() + d["delta"].get<std::string>();
      } else if (e.name == "response.output_item.done") {
        const size_t i = d["output_index"];
        CHECK(d["item"] == out[i]);
        items[i]["status"] = d["item"]["status"];
      } else if (e.name == "response.function_call_arguments.done") {
        CHECK(d["arguments"] == out[d["output_index"].get<size_t>()]["arguments"]);
      }
    }
    CHECK(items == out);
  }
  // Cut by max_output_tokens: incomplete, and so is the item open at the end.
  ResponseWriter w("resp_2", 1, "m", settings, 1.0, 1.0, true);
  w.start();
  ChoiceDelta d;
  d.content = "abc";
  w.add(d);
  const auto events = parse_named_events(w.finish("length", Usage{3, 4, 0}, 0));
  CHECK(events.back().name == "response.incomplete");
  CHECK(w.response()["status"] == "incomplete");
  CHECK(w.response()["incomplete_details"]["reason"] == "max_output_tokens");
  CHECK(w.response()["output"][0]["status"] == "incomplete");
  const auto failed = parse_named_events(w.fail("boom"));
  CHECK(failed.back().name == "response.failed");
  CHECK(failed.back().data["response"]["error"]["message"] == "boom");
}

TEST_CASE("agent requests: image blocks become chat image_url parts, in order", "[agent]") {
  const Json chat = messages_to_chat_body(Json::parse(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
      {"type": "text", "text": "a"},
      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
      {"type": "image", "source": {"type": "url", "url": "https://h/x.jpg"}},
      {"type": "text", "text": "b"}]}]})"),
                                          MessagesEndpoint::create);
  const Json& c = chat["messages"][0]["content"];
  REQUIRE(c.is_array());
  REQUIRE(c.size() == 4);
  CHECK(c[0] == Json::parse(R"({"type": "text", "text": "a"})"));
  CHECK(c[1]["image_url"]["url"] == "data:image/png;base64,AAAA");
  CHECK(c[2]["image_url"]["url"] == "https://h/x.jpg");
  // Each keeps the client's field, for its errors.
  CHECK(c[1]["client_field"] == "messages[0].content[1].source.data");
  CHECK(c[2]["client_field"] == "messages[0].content[2].source.url");
  CHECK(c[3]["text"] == "b");
  // Text alone stays one string.
  CHECK(messages_to_chat_body(Json::parse(R"({"max_tokens": 8, "messages": [{"role": "user", "content": [
      {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})"),
                              MessagesEndpoint::create)["messages"][0]["content"] == "a\nb");
  const Json r = parse_responses_request(Json::parse(R"({"input": [{"role": "user", "content": [
      {"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": "data:image/gif;base64,AAAA"}]}]})")).chat_body;
  const Json& rc = r["messages"][0]["content"];
  REQUIRE(rc.size() == 2);
  CHECK(rc[1] == Json::parse(R"({"type": "image_url", "image_url": {"url": "data:image/gif;base64,AAAA"},
                                  "client_field": "input[0].content[1].image_url"})"));
}
