// 1M-token prompts through the HTTP server (issue 48): a completion whose prompt is 1,048,000
// token ids (a ~7 MB body), and a chat message of several megabytes of text through the chat
// template and the tokenizer, served by a ScriptedModel (the tiny model's tokenizer and template)
// with --max-ctx 1048576: nothing on the way (body limits, JSON, template, tokenizer, context
// check, engine, usage) stops or truncates them; one token past the context is a 400 naming it.
#include <catch2/catch.hpp>

#include <random>

#include "tests/server/http_test_util.h"
#include "tests/server/server_fixture.h"

using namespace ds::test;

namespace {

constexpr int64_t kMillion = int64_t{1} << 20;

TestServerConfig long_config() {
  TestServerConfig c;
  c.scripted = true;
  c.script = encode("Done.");
  c.engine.max_ctx = kMillion;
  c.engine.cache_bytes = int64_t{64} << 20;  // the scripted model's K/V is 8 bytes a token
  c.engine.scheduler.max_num_batched_tokens = 65536;
  c.transport.limits.max_body_bytes = 32u << 20;
  return c;
}

}  // namespace

TEST_CASE("long: a 1M-token prompt as token ids, and one past the context", "[long]") {
  TestServer srv(long_config());
  REQUIRE(srv.engine().max_ctx() == kMillion);
  std::mt19937 rng(5);
  Json ids = Json::array();
  const int64_t n = kMillion - 576;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(rng() % 1000));
  const auto r = srv.post("/v1/completions", Json{{"prompt", ids}, {"max_tokens", 8}, {"temperature", 0}});
  REQUIRE(r.status == 200);
  CHECK(r.body["usage"]["prompt_tokens"] == n);
  CHECK(r.body["choices"][0]["text"] == "Done.");
  // max_tokens past the context is named; so is a prompt that fills it.
  const auto over = srv.post("/v1/completions", Json{{"prompt", ids}, {"max_tokens", 1000}});
  CHECK(over.status == 400);
  CHECK(over.body["error"]["param"] == "max_tokens");
  for (int64_t i = n; i < kMillion; ++i) ids.push_back(1);
  const auto full = srv.post("/v1/completions", Json{{"prompt", ids}, {"max_tokens", 1}});
  CHECK(full.status == 400);
  CHECK(full.body["error"]["code"] == "context_length_exceeded");
  CHECK(srv.wait_pools_free());
}

TEST_CASE("long: megabytes of chat text through the template and the tokenizer", "[long]") {
  TestServer srv(long_config());
  // Varied text: words, numbers, punctuation, non-ASCII, newlines (the tiny tokenizer's small
  // vocabulary makes ~0.8 tokens a byte of it).
  const char* words[] = {"sea ", "wave, ", "42 ", "naïve ", "日本語 ", "tide.\n", "shore; ", "😀 ", "3.14 ", "café\t"};
  std::mt19937 rng(8);
  auto text_of = [&](size_t bytes) {
    std::string text;
    while (text.size() < bytes) text += words[rng() % 10];
    return text;
  };
  auto messages = [](const std::string& text) { return Json::array({Json{{"role", "user"}, {"content", text}}}); };
  // 3 MB: tokenised whole (/tokenize), and too long for the context (a 400 that says so).
  const std::string big = text_of(size_t{3} << 20);
  const auto tok = srv.post("/tokenize", Json{{"messages", messages(big)}});
  REQUIRE(tok.status == 200);
  CHECK(tok.body["count"] > kMillion);
  const auto detok = srv.post("/detokenize", Json{{"tokens", tok.body["tokens"]}});
  REQUIRE(detok.status == 200);
  CHECK(detok.body["prompt"].get<std::string>().find(big) != std::string::npos);
  const auto refused = srv.post("/v1/chat/completions", Json{{"messages", messages(big)}, {"max_tokens", 8}});
  CHECK(refused.status == 400);
  CHECK(refused.body["error"]["code"] == "context_length_exceeded");
  // 1.2 MB: ~1M tokens, served.
  const std::string text = text_of(1200000);
  const Json msgs = messages(text);
  const Json no_thinking = {{"enable_thinking", false}};
  const int64_t count = srv.post("/tokenize", Json{{"messages", msgs}, {"chat_template_kwargs", no_thinking}}).body["count"];
  CHECK(count > 800000);
  REQUIRE(count < kMillion - 8);
  const auto r = srv.post("/v1/chat/completions", Json{{"messages", msgs}, {"max_tokens", 8}, {"temperature", 0},
                                                       {"chat_template_kwargs", no_thinking}});
  REQUIRE(r.status == 200);
  CHECK(r.body["usage"]["prompt_tokens"] == count);
  CHECK(r.body["choices"][0]["message"]["content"] == "Done.");
  CHECK(srv.wait_pools_free());
}
