// Prefix caching through the HTTP API on the tiny model (CPU backend): a conversation's later
// turns report usage.prompt_tokens_details.cached_tokens and say exactly what a server without
// the cache says; requests sharing a long system prompt hit it; /metrics counts it.
#include <catch2/catch.hpp>

#include <thread>

#include "tests/server/server_fixture.h"

using namespace ds::test;

namespace {

TestServerConfig cached_server(bool on) {
  TestServerConfig cfg;
  cfg.engine.prefix_caching = on;
  cfg.engine.snapshot_bytes = 24 << 20;  // 15 snapshots of the tiny model's 1.6 MiB state
  return cfg;
}

Json chat(const Json& messages, int max_tokens = 16) {
  return Json{{"messages", messages}, {"temperature", 0}, {"max_tokens", max_tokens}};
}

int64_t cached_of(const Json& body) {
  const Json& u = body["usage"];
  REQUIRE(u.contains("prompt_tokens_details"));
  return u["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
}

}  // namespace

TEST_CASE("prefix cache: a three-turn chat reuses each previous turn's prompt, with the same replies",
          "[prefix]") {
  TestServer warm(cached_server(true));
  TestServer cold(cached_server(false));
  Json messages = Json::array({Json{{"role", "system"}, {"content", "You are a terse assistant. Answer briefly."}}});
  const char* questions[] = {"Tell me about the sea and the ships that sail on it.",
                             "And what about rivers, lakes and the fish in them?",
                             "Finally, name three mountains and say which is tallest."};
  int64_t previous_prompt = 0;
  for (int turn = 0; turn < 3; ++turn) {
    INFO("turn " << turn);
    messages.push_back(Json{{"role", "user"}, {"content", questions[turn]}});
    const auto a = warm.post("/v1/chat/completions", chat(messages));
    const auto b = cold.post("/v1/chat/completions", chat(messages));
    REQUIRE(a.status == 200);
    REQUIRE(b.status == 200);
    CHECK(a.body["choices"][0]["message"] == b.body["choices"][0]["message"]);
    const int64_t prompt = a.body["usage"]["prompt_tokens"].get<int64_t>();
    CHECK(cached_of(b.body) == 0);
    if (turn > 0) CHECK(cached_of(a.body) >= previous_prompt - 15);
    previous_prompt = prompt;
    const Json reply = a.body["choices"][0]["message"];
    messages.push_back(Json{{"role", "assistant"}, {"content", reply["content"]}});
  }
  // The streaming usage chunk reports it too.
  Json sb = chat(messages);
  sb["stream"] = true;
  sb["stream_options"] = {{"include_usage", true}};
  const auto s = warm.post("/v1/chat/completions", sb);
  const SseStream sse = parse_sse(s.text);
  REQUIRE(sse.done);
  const Json& last = sse.events.back();
  REQUIRE(last["choices"].empty());
  CHECK(cached_of(last) >= previous_prompt - 15);
  // /metrics counts queries and hits in tokens.
  const std::string m = warm.get("/metrics").text;
  CHECK(m.find("vllm:prefix_cache_hits_total{model_name=\"tiny-qwen35\"} 0\n") == std::string::npos);
  CHECK(m.find("vllm:prefix_cache_queries_total{model_name=\"tiny-qwen35\"}") != std::string::npos);
  CHECK(m.find("deltaserve:prefix_cache_snapshot_capacity{model_name=\"tiny-qwen35\"} 15") != std::string::npos);
  // Nothing runs, yet the cache keeps its blocks (and only the cache holds them).
  const auto st = warm.engine().stats();
  CHECK(st.running == 0);
  CHECK(st.prefix_cache_blocks > 0);
  CHECK(st.blocks_used == st.prefix_cache_blocks);
  // ... which /metrics' usage counts as free, as vLLM does: an idle server reads 0.
  const std::string idle = warm.get("/metrics").text;
  CHECK(idle.find("vllm:kv_cache_usage_perc{model_name=\"tiny-qwen35\"} 0\n") != std::string::npos);
  CHECK(idle.find("deltaserve:kv_cache_blocks_used{model_name=\"tiny-qwen35\"} " + std::to_string(st.blocks_used) + "\n") !=
        std::string::npos);
}

TEST_CASE("prefix cache: with thinking off, a turn hits the previous turn's prompt up to its generation prompt",
          "[prefix]") {
  // Qwen3.5's template closes an empty think block in the generation prompt when thinking is
  // off ("<|im_start|>assistant\n<think>\n\n</think>\n\n") and the next turn renders the reply
  // without it: the turns share the previous prompt only up to its generation prompt. A
  // snapshot at the previous prompt's end lies past that whenever a block boundary falls in
  // the 6 tokens between, and the next turn then hit nothing; the generation prompt's start is
  // a cache point of its own.
  TestServer srv(cached_server(true));
  int boundary_inside = 0;
  for (int words = 0; words < 12; ++words) {
    std::string question = "Name the lighthouse";
    for (int w = 0; w < words; ++w) question += " and its keeper";
    question += "?";
    INFO(words << " extra words");
    Json messages = Json::array({Json{{"role", "system"}, {"content", "Answer in one line."}},
                                 Json{{"role", "user"}, {"content", question}}});
    const Json kwargs = {{"enable_thinking", false}};
    Json first_req = chat(messages, 4);
    first_req["chat_template_kwargs"] = kwargs;
    const auto first = srv.post("/v1/chat/completions", first_req);
    REQUIRE(first.status == 200);
    messages.push_back(Json{{"role", "assistant"}, {"content", first.body["choices"][0]["message"]["content"]}});
    messages.push_back(Json{{"role", "user"}, {"content", "And the next one along the coast?"}});
    auto tokens = [&](const Json& msgs) {
      const auto t = srv.post("/tokenize", Json{{"messages", msgs}, {"add_generation_prompt", true},
                                                {"chat_template_kwargs", kwargs}});
      REQUIRE(t.status == 200);
      return t.body["tokens"].get<std::vector<int64_t>>();
    };
    const std::vector<int64_t> t1 = tokens(Json(std::vector<Json>(messages.begin(), messages.end() - 2)));
    const std::vector<int64_t> t2 = tokens(messages);
    REQUIRE(static_cast<int64_t>(t1.size()) == first.body["usage"]["prompt_tokens"].get<int64_t>());
    size_t common = 0;
    while (common < t1.size() && common < t2.size() && t1[common] == t2[common]) ++common;
    REQUIRE(common < t1.size());  // the template re-renders the end of the first prompt
    REQUIRE(t1.size() - common <= 8);
    const int64_t prompt_end_block = (static_cast<int64_t>(t1.size()) - 1) / 16 * 16;
    boundary_inside += prompt_end_block > static_cast<int64_t>(common);
    Json second_req = chat(messages, 4);
    second_req["chat_template_kwargs"] = kwargs;
    const auto second = srv.post("/v1/chat/completions", second_req);
    REQUIRE(second.status == 200);
    // The generation prompt starts at the first prompt's last <|im_start|> (its first token);
    // "<|im_start|>assistant\n" (3 tokens) is what the next turn renders the same.
    int64_t gen_start = static_cast<int64_t>(t1.size()) - 1;
    while (gen_start > 0 && t1[static_cast<size_t>(gen_start)] != t1[0]) --gen_start;
    INFO("first prompt " << t1.size() << " tokens, " << common << " shared with the second, generation prompt at "
                         << gen_start);
    REQUIRE(gen_start + 3 <= static_cast<int64_t>(common));
    CHECK(cached_of(second.body) >= (gen_start + 3) / 16 * 16);
  }
  CHECK(boundary_inside > 0);  // some of the conversations put the boundary where it mattered
}

TEST_CASE("prefix cache: eight concurrent requests sharing a 1,000-token system prompt hit it", "[prefix]") {
  TestServer srv(cached_server(true));
  std::string system;
  while (srv.tokenizer().encode(system).size() < 1000) system += "Rules of the house number " + std::to_string(system.size()) + ". ";
  const Json first = chat(Json::array({Json{{"role", "system"}, {"content", system}},
                                       Json{{"role", "user"}, {"content", "Hello, this is the first request."}}}),
                          4);
  const auto a = srv.post("/v1/chat/completions", first);
  REQUIRE(a.status == 200);
  CHECK(cached_of(a.body) == 0);
  std::vector<TestServer::Reply> replies(7);
  std::vector<std::thread> ts;
  for (int i = 0; i < 7; ++i)
    ts.emplace_back([&, i] {
      replies[static_cast<size_t>(i)] = srv.post(
          "/v1/chat/completions",
          chat(Json::array({Json{{"role", "system"}, {"content", system}},
                            Json{{"role", "user"}, {"content", "Question " + std::to_string(i) + ": what is " +
                                                                   std::to_string(i * 7) + " plus one?"}}}),
               4));
    });
  for (auto& t : ts) t.join();
  const int64_t system_tokens = static_cast<int64_t>(srv.tokenizer().encode(system).size());
  for (const auto& r : replies) {
    REQUIRE(r.status == 200);
    // The system message's end, rounded down to the 16-token block.
    CHECK(cached_of(r.body) >= system_tokens - 16);
  }
}

TEST_CASE("prefix cache: a /v1/completions prompt sent again is served from the cache on its second send",
          "[prefix]") {
  TestServer srv(cached_server(true));
  std::string prompt;
  while (srv.tokenizer().encode(prompt).size() < 200) prompt += "A completion prompt that is sent twice. ";
  const Json body = {{"prompt", prompt}, {"temperature", 0}, {"max_tokens", 4}};
  const auto first = srv.post("/v1/completions", body);
  const auto second = srv.post("/v1/completions", body);
  REQUIRE(first.status == 200);
  REQUIRE(second.status == 200);
  CHECK(cached_of(first.body) == 0);
  const int64_t prompt_tokens = second.body["usage"]["prompt_tokens"].get<int64_t>();
  // The prompt's end, rounded down to the 16-token block (one token is always computed).
  CHECK(cached_of(second.body) >= prompt_tokens - 16);
  CHECK(second.body["choices"][0]["text"] == first.body["choices"][0]["text"]);
}

TEST_CASE("prefix cache: a chat's cached tokens come back from the host tier after the device evicted them",
          "[prefix]") {
  // A device cache of 64 blocks (1,024 tokens) and 2 snapshots under a 128 MiB host tier.
  TestServerConfig cfg = cached_server(true);
  cfg.engine.cache_bytes = 0;
  cfg.engine.num_blocks = 64;
  cfg.engine.num_snapshots = 2;
  cfg.engine.host_cache_bytes = int64_t{128} << 20;
  TestServer warm(cfg);
  TestServer cold(cached_server(false));
  Json messages = Json::array({Json{{"role", "system"}, {"content", "You are a terse assistant."}},
                               Json{{"role", "user"}, {"content", "Describe a harbour at dawn, with its boats."}}});
  const auto first = warm.post("/v1/chat/completions", chat(messages));
  REQUIRE(first.status == 200);
  const int64_t first_prompt = first.body["usage"]["prompt_tokens"].get<int64_t>();
  messages.push_back(Json{{"role", "assistant"}, {"content", first.body["choices"][0]["message"]["content"]}});
  // Other conversations, long enough together to push the first out of the device cache.
  std::string filler;
  for (int i = 0; i < 150; ++i) filler += "word" + std::to_string(i) + " ";
  for (int i = 0; i < 4; ++i) {
    const Json other = Json::array({Json{{"role", "user"}, {"content", std::to_string(i) + " " + filler}}});
    REQUIRE(warm.post("/v1/chat/completions", chat(other, 4)).status == 200);
  }
  REQUIRE(warm.engine().stats().host_cache_stored_blocks_total > 0);
  messages.push_back(Json{{"role", "user"}, {"content", "And the same harbour at night?"}});
  const auto a = warm.post("/v1/chat/completions", chat(messages));
  const auto b = cold.post("/v1/chat/completions", chat(messages));
  REQUIRE(a.status == 200);
  REQUIRE(b.status == 200);
  CHECK(a.body["choices"][0]["message"] == b.body["choices"][0]["message"]);
  CHECK(cached_of(a.body) >= first_prompt - 15);
  const auto st = warm.engine().stats();
  CHECK(st.host_cache_hits_total >= 1);
  CHECK(st.host_cache_pinned == 0);
  const std::string m = warm.get("/metrics").text;
  CHECK(m.find("deltaserve:prefix_cache_hit_tokens_total{model_name=\"tiny-qwen35\",tier=\"host\"} 0\n") ==
        std::string::npos);
  CHECK(m.find("deltaserve:prefix_cache_host_hits_total{model_name=\"tiny-qwen35\"}") != std::string::npos);
  CHECK(m.find("deltaserve:prefix_cache_host_load_seconds_count{model_name=\"tiny-qwen35\"}") != std::string::npos);
  CHECK(m.find("deltaserve:prefix_cache_host_bytes_total{model_name=\"tiny-qwen35\",direction=\"load\"}") !=
        std::string::npos);
}
