// Thinking budgets over HTTP on the tiny model (CPU backend), with a chat template in the
// style of Qwen3.5's (the reply starts inside <think>): the OpenAI chat fields
// (thinking_token_budget, SGLang's thinking_budget, reasoning_effort), Anthropic's
// thinking.budget_tokens and the Responses API's reasoning.effort through
// --reasoning-effort-budgets, serve's default budget, usage's reasoning tokens, a json_schema
// constraint after the forced close, and n-gram speculative decoding. The oracle of a budgeted
// reply is the model itself: the unbudgeted reply's first N tokens, the close sequence, then
// what /v1/completions continues from exactly those tokens.
#include <catch2/catch.hpp>

#include <map>

#include "tests/server/http_test_util.h"
#include "tests/server/server_fixture.h"

using namespace ds::test;

namespace {

constexpr int32_t kThinkEnd = 1012;  // </think> in the tiny tokenizer

Json user(const std::string& text) { return Json::array({Json{{"role", "user"}, {"content", text}}}); }

TestServerConfig thinking_config() {
  TestServerConfig c;
  c.chat_template_file = "chat-templates/qwen35_style.jinja";
  return c;
}

std::vector<int32_t> ids_of(const Json& v) { return v.get<std::vector<int32_t>>(); }

// The question every case asks: its greedy unbudgeted reply thinks past 8 tokens without
// closing the block or ending (checked, so a change of fixture fails here and not obscurely).
const std::string kQuestion = "Tell me about the sea, the sea, the sea and the waves of the sea.";

Json chat_body(int64_t max_tokens = 24) {
  return Json{{"messages", user(kQuestion)}, {"max_tokens", max_tokens}, {"temperature", 0},
              {"return_token_ids", true}, {"ignore_eos", true}};
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("thinking: a chat budget closes reasoning at N tokens and the model answers after it", "[thinking]") {
  TestServer srv(thinking_config());
  const auto free_reply = srv.post("/v1/chat/completions", chat_body());
  REQUIRE(free_reply.status == 200);
  const std::vector<int32_t> free_ids = ids_of(free_reply.body["choices"][0]["token_ids"]);
  REQUIRE(free_ids.size() == 24);
  for (size_t i = 0; i < 8; ++i) REQUIRE(free_ids[i] != kThinkEnd);
  // No budget: all 24 tokens are reasoning.
  CHECK(free_reply.body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 24);
  const std::string free_reasoning = free_reply.body["choices"][0]["message"]["reasoning_content"];

  const std::vector<int32_t> prompt = ids_of(srv.post("/tokenize", Json{{"messages", user(kQuestion)}}).body["tokens"]);
  const std::vector<int32_t> close = srv.tokenizer().encode("</think>\n\n", true);
  REQUIRE(close.front() == kThinkEnd);
  for (const char* field : {"thinking_token_budget", "thinking_budget"}) {
    for (int64_t budget : {0, 1, 5, 8}) {
      INFO(field << " = " << budget);
      Json b = chat_body();
      b[field] = budget;
      const auto r = srv.post("/v1/chat/completions", b);
      REQUIRE(r.status == 200);
      const Json& choice = r.body["choices"][0];
      const std::vector<int32_t> ids = ids_of(choice["token_ids"]);
      const std::vector<int32_t> head =
          concat(std::vector<int32_t>(free_ids.begin(), free_ids.begin() + budget), close);
      REQUIRE(ids.size() == 24);
      CHECK(std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<int64_t>(head.size())) == head);
      // The answer is the model's own continuation of exactly that history.
      const auto c = srv.post("/v1/completions",
                              Json{{"prompt", concat(prompt, head)}, {"max_tokens", 24 - static_cast<int64_t>(head.size())},
                                   {"temperature", 0}, {"ignore_eos", true}, {"return_token_ids", true}});
      REQUIRE(c.status == 200);
      CHECK(ids == concat(head, ids_of(c.body["choices"][0]["token_ids"])));
      CHECK(r.body["usage"]["completion_tokens_details"]["reasoning_tokens"] == budget);
      const Json& msg = choice["message"];
      const std::string reasoning = msg["reasoning_content"].is_null() ? "" : msg["reasoning_content"].get<std::string>();
      CHECK(free_reasoning.rfind(reasoning, 0) == 0);
      std::string text = c.body["choices"][0]["text"];
      text.erase(0, text.find_first_not_of('\n'));
      CHECK(msg["content"] == text);
    }
  }
  // Streaming: the same reply, and the usage chunk carries the reasoning tokens.
  Json s = chat_body();
  s["thinking_token_budget"] = 5;
  s["stream"] = true;
  s["stream_options"] = {{"include_usage", true}};
  const auto streamed = collect_stream(parse_sse(srv.post("/v1/chat/completions", s).text), true);
  CHECK(streamed.at(-1).usage["completion_tokens_details"]["reasoning_tokens"] == 5);
  s.erase("stream");
  s.erase("stream_options");
  const auto whole = srv.post("/v1/chat/completions", s);
  CHECK(streamed.at(0).content == whole.body["choices"][0]["message"]["content"]);
  CHECK(streamed.at(0).reasoning == whole.body["choices"][0]["message"]["reasoning_content"]);
  CHECK(srv.wait_pools_free());
}

TEST_CASE("thinking: effort budgets, the default budget, thinking off, and what is refused", "[thinking]") {
  TestServerConfig cfg = thinking_config();
  cfg.default_thinking_budget = 2;
  cfg.effort_budgets = {{"low", 3}, {"high", 7}};
  TestServer srv(cfg);
  auto reasoning_tokens = [&](const Json& b) {
    const auto r = srv.post("/v1/chat/completions", b);
    REQUIRE(r.status == 200);
    return r.body["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int64_t>();
  };
  CHECK(reasoning_tokens(chat_body()) == 2);  // --default-thinking-budget
  Json b = chat_body();
  b["reasoning_effort"] = "low";
  CHECK(reasoning_tokens(b) == 3);
  b["reasoning_effort"] = "high";
  CHECK(reasoning_tokens(b) == 7);
  b["reasoning_effort"] = "medium";  // no budget of its own: the default
  CHECK(reasoning_tokens(b) == 2);
  b["thinking_token_budget"] = 6;  // the request's own budget wins
  CHECK(reasoning_tokens(b) == 6);
  // Thinking off: the prompt closed the block, nothing is thought or forced.
  Json off = chat_body();
  off["reasoning_effort"] = "none";
  const auto r = srv.post("/v1/chat/completions", off);
  REQUIRE(r.status == 200);
  CHECK(r.body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0);
  CHECK(r.body["choices"][0]["message"]["reasoning_content"].is_null());
  off.erase("reasoning_effort");
  off["chat_template_kwargs"] = {{"enable_thinking", false}};
  CHECK(srv.post("/v1/chat/completions", off).body["choices"][0]["token_ids"] ==
        r.body["choices"][0]["token_ids"]);

  for (const auto& [field, value] : std::vector<std::pair<std::string, Json>>{
           {"thinking_token_budget", -1}, {"thinking_budget", "many"}, {"reasoning_effort", "extreme"}}) {
    Json bad = chat_body();
    bad[field] = value;
    const auto e = srv.post("/v1/chat/completions", bad);
    CHECK(e.status == 400);
    CHECK(e.body["error"]["param"] == field);
  }
  Json both = chat_body();
  both["thinking_token_budget"] = 3;
  both["thinking_budget"] = 4;
  CHECK(srv.post("/v1/chat/completions", both).status == 400);
  CHECK(srv.wait_pools_free());
}

TEST_CASE("thinking: Anthropic budget_tokens and Responses reasoning.effort are the chat budget", "[thinking]") {
  TestServerConfig cfg = thinking_config();
  cfg.effort_budgets = {{"low", 3}};
  TestServer srv(cfg);
  // The chat reply with the same budget, for the reasoning text.
  auto chat_reasoning = [&](int64_t budget) {
    Json b = chat_body();
    b.erase("ignore_eos");
    b["thinking_token_budget"] = budget;
    const auto r = srv.post("/v1/chat/completions", b);
    REQUIRE(r.status == 200);
    return r.body["choices"][0]["message"];
  };

  const Json m = {{"model", "tiny-qwen35"}, {"max_tokens", 24}, {"temperature", 0}, {"messages", user(kQuestion)},
                  {"thinking", {{"type", "enabled"}, {"budget_tokens", 4}}}};
  const auto r = srv.post("/v1/messages", m);
  REQUIRE(r.status == 200);
  const Json& blocks = r.body["content"];
  REQUIRE(blocks.size() >= 1);
  CHECK(blocks[0]["type"] == "thinking");
  const Json chat4 = chat_reasoning(4);
  CHECK(blocks[0]["thinking"] == chat4["reasoning_content"]);
  if (blocks.size() > 1) CHECK(blocks[1]["text"] == chat4["content"]);
  CHECK(r.body["usage"]["output_tokens_details"]["reasoning_tokens"] == 4);
  // Adaptive thinking has no budget: the reply thinks on.
  Json adaptive = m;
  adaptive["thinking"] = {{"type", "adaptive"}};
  CHECK(srv.post("/v1/messages", adaptive).body["usage"]["output_tokens_details"]["reasoning_tokens"] > 4);

  const Json q = {{"model", "tiny-qwen35"}, {"max_output_tokens", 24}, {"temperature", 0}, {"input", kQuestion},
                  {"reasoning", {{"effort", "low"}}}};
  const auto resp = srv.post("/v1/responses", q);
  REQUIRE(resp.status == 200);
  const Json& out = resp.body["output"];
  REQUIRE(out.size() >= 1);
  CHECK(out[0]["type"] == "reasoning");
  CHECK(out[0]["content"][0]["text"] == chat_reasoning(3)["reasoning_content"]);
  CHECK(resp.body["usage"]["output_tokens_details"]["reasoning_tokens"] == 3);
  // vLLM's and SGLang's fields on these APIs are the chat fields.
  Json q2 = q;
  q2.erase("reasoning");
  q2["thinking_token_budget"] = 2;
  CHECK(srv.post("/v1/responses", q2).body["usage"]["output_tokens_details"]["reasoning_tokens"] == 2);
  Json m2 = m;
  m2["thinking_budget"] = 1;
  m2["thinking"] = {{"type", "enabled"}};
  CHECK(srv.post("/v1/messages", m2).body["usage"]["output_tokens_details"]["reasoning_tokens"] == 1);
  CHECK(srv.wait_pools_free());
}

TEST_CASE("thinking: a budget before a json_schema constraint; the answer still follows the schema", "[thinking]") {
  TestServer srv(thinking_config());
  Json bias = Json::object();  // JSON structure tokens favoured, so values end within max_tokens
  for (int32_t t = 0; t < srv.tokenizer().vocab_size(); ++t)
    if (!srv.tokenizer().is_special(t) && srv.tokenizer().token_bytes(t).find_first_of("\"{}[],") != std::string_view::npos)
      bias[std::to_string(t)] = 3;
  const Json schema = Json::parse(R"({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0,
      "maximum": 99}}, "required": ["age"], "additionalProperties": false})");
  int completed = 0;
  for (int seed = 0; seed < 6; ++seed) {
    Json b = {{"messages", user("Age as JSON")}, {"max_tokens", 80}, {"temperature", 1}, {"seed", seed},
              {"logit_bias", bias}, {"thinking_token_budget", 3},
              {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "a"}, {"schema", schema}}}}}};
    const auto r = srv.post("/v1/chat/completions", b);
    REQUIRE(r.status == 200);
    CHECK(r.body["usage"]["completion_tokens_details"]["reasoning_tokens"] <= 3);
    const Json& choice = r.body["choices"][0];
    if (choice["finish_reason"] != "stop") continue;
    const std::string content = choice["message"]["content"];
    INFO(content);
    const Json v = Json::parse(content, nullptr, false);
    REQUIRE(v.is_object());
    REQUIRE(v["age"].is_number_integer());
    CHECK(v["age"].get<int>() <= 99);
    ++completed;
  }
  CHECK(completed >= 3);
  CHECK(srv.wait_pools_free());
}

TEST_CASE("thinking: n-gram speculative decoding gives the budgeted reply token for token", "[thinking]") {
  std::map<int64_t, std::vector<int32_t>> plain;  // by budget
  for (bool speculate : {false, true}) {
    TestServerConfig cfg = thinking_config();
    if (speculate) {
      cfg.engine.speculative.method = "ngram";
      cfg.engine.speculative.num_speculative_tokens = 3;
    }
    TestServer srv(cfg);
    for (int64_t budget : {1, 4, 9}) {
      Json b = chat_body(32);
      b["thinking_token_budget"] = budget;
      b["temperature"] = budget == 4 ? 0.8 : 0.0;  // one seeded sampled reply
      b["seed"] = 11;
      const auto r = srv.post("/v1/chat/completions", b);
      REQUIRE(r.status == 200);
      const std::vector<int32_t> ids = ids_of(r.body["choices"][0]["token_ids"]);
      INFO("budget " << budget);
      if (!speculate)
        plain[budget] = ids;
      else
        CHECK(ids == plain.at(budget));
    }
    if (speculate) CHECK(srv.engine().stats().spec_decode_drafts_total > 0);
    CHECK(srv.wait_pools_free());
  }
}
