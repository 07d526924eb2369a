// The HTTP API end to end: a real HttpServer in-process on a free port, requests through
// cpp-httplib's client (and raw sockets for clients that vanish). The bundled tiny Qwen3.5
// checkpoint on the CPU backend checks exact outputs against the HF reference fixture; a
// ScriptedModel drives replies a random-weight model never writes (reasoning, tool calls)
// and slow or failing steps. Tags group the cases; CTest runs one entry per tag.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "tests/server/http_test_util.h"
#include "tests/server/server_fixture.h"

using namespace ds::test;
using ds::server::dump_json;

namespace {

}  // namespace

TEST_CASE("fixture chat cases: greedy replies equal the HF reference", "[fixture]") {
  TestServer srv;
  const Json ref = load_reference();
  const auto& tok = srv.tokenizer();
  for (const auto& c : ref["chat"]) {
    const auto ids = c["greedy_ids"].get<std::vector<int32_t>>();
    // The reply ends at the first eos (<|im_end|> or <|endoftext|>) if there is one.
    auto end = std::find_if(ids.begin(), ids.end(), [](int32_t t) { return t == 1006 || t == 1004; });
    const bool eos = end != ids.end();
    const std::vector<int32_t> shown(ids.begin(), end);
    const std::string expected = tok.decode(shown, /*skip_special=*/true);

    auto r = srv.post("/v1/chat/completions", chat_body(c["messages"]));
    REQUIRE(r.status == 200);
    const Json& choice = r.body["choices"][0];
    CHECK(choice["message"]["content"] == expected);
    CHECK(choice["finish_reason"] == (eos ? "stop" : "length"));
    CHECK(r.body["usage"]["prompt_tokens"] == c["prompt_ids"].size());
    CHECK(r.body["usage"]["completion_tokens"] == (eos ? shown.size() + 1 : ids.size()));
    CHECK(r.body["object"] == "chat.completion");
    CHECK(r.body["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);

    // The same reply streamed: deltas concatenate to it; usage comes last with no choices.
    Json sb = chat_body(c["messages"]);
    sb["stream"] = true;
    sb["stream_options"] = {{"include_usage", true}};
    auto s = srv.post("/v1/chat/completions", sb);
    REQUIRE(s.status == 200);
    const auto sse = parse_sse(s.text);
    CHECK(sse.done_last);
    auto got = collect_stream(sse, true);
    CHECK(got[0].content == expected);
    CHECK(got[0].finish == (eos ? "stop" : "length"));
    CHECK(got[-1].usage["completion_tokens"] == r.body["usage"]["completion_tokens"]);
    CHECK(sse.events.back()["choices"].empty());

    // /tokenize renders and encodes the messages to the reference prompt ids.
    auto t = srv.post("/tokenize", Json{{"messages", c["messages"]}});
    REQUIRE(t.status == 200);
    CHECK(t.body["tokens"] == c["prompt_ids"]);
  }
}

TEST_CASE("fixture: an eos or a stop token id ends the reply early with finish_reason stop", "[fixture]") {
  TestServer srv;
  const Json ref = load_reference();
  const Json& c0 = ref["chat"][0];
  const auto ids = c0["greedy_ids"].get<std::vector<int32_t>>();

  // Bias <|im_end|> so the model says it first: empty reply, one token, stop.
  Json b = chat_body(c0["messages"]);
  b["logit_bias"] = {{"1006", 100}};
  auto r = srv.post("/v1/chat/completions", b);
  REQUIRE(r.status == 200);
  CHECK(r.body["choices"][0]["finish_reason"] == "stop");
  CHECK(r.body["choices"][0]["message"]["content"] == "");
  CHECK(r.body["usage"]["completion_tokens"] == 1);

  // ignore_eos keeps going to max_tokens.
  b["ignore_eos"] = true;
  b["max_tokens"] = 4;
  r = srv.post("/v1/chat/completions", b);
  CHECK(r.body["choices"][0]["finish_reason"] == "length");
  CHECK(r.body["usage"]["completion_tokens"] == 4);

  // A stop token id: the reply ends on it (shown: it is not a special token).
  Json s = chat_body(c0["messages"]);
  s["stop_token_ids"] = {ids[5]};
  r = srv.post("/v1/chat/completions", s);
  REQUIRE(r.status == 200);
  CHECK(r.body["choices"][0]["finish_reason"] == "stop");
  CHECK(r.body["choices"][0]["stop_reason"] == ids[5]);
  CHECK(r.body["choices"][0]["message"]["content"] ==
        srv.tokenizer().decode(std::vector<int32_t>(ids.begin(), ids.begin() + 6), true));
}

TEST_CASE("parameters: stop strings, n, seeds, sampling filters, logprobs, max tokens", "[params]") {
  TestServer srv;
  const Json ref = load_reference();
  const Json& c0 = ref["chat"][0];
  const auto& tok = srv.tokenizer();
  const std::string full = tok.decode(c0["greedy_ids"].get<std::vector<int32_t>>(), true);

  SECTION("stop strings cut before the match, streamed or not, never showing a part of it") {
    const std::string stop = "ONTIS";
    const size_t at = full.find(stop);
    REQUIRE(at != std::string::npos);
    Json b = chat_body(c0["messages"]);
    b["stop"] = Json::array({"zzzz", stop});
    auto r = srv.post("/v1/chat/completions", b);
    REQUIRE(r.status == 200);
    CHECK(r.body["choices"][0]["message"]["content"] == full.substr(0, at));
    CHECK(r.body["choices"][0]["finish_reason"] == "stop");
    CHECK(r.body["choices"][0]["stop_reason"] == stop);
    b["stream"] = true;
    auto s = srv.post("/v1/chat/completions", b);
    auto got = collect_stream(parse_sse(s.text), true);
    CHECK(got[0].content == full.substr(0, at));
    CHECK(got[0].finish == "stop");
    for (const auto& ev : parse_sse(s.text).events) {
      const Json& d = ev["choices"][0]["delta"];
      if (d.contains("content")) CHECK(d["content"].get<std::string>().find("ONT") == std::string::npos);
    }
    b.erase("stream");
    b["stop"] = stop;
    b["include_stop_str_in_output"] = true;
    r = srv.post("/v1/chat/completions", b);
    CHECK(r.body["choices"][0]["message"]["content"] == full.substr(0, at + stop.size()));
  }
  SECTION("n independent choices; a seed makes them reproducible") {
    Json b = {{"messages", hello()}, {"max_tokens", 8}, {"n", 3}, {"temperature", 1.0}, {"seed", 1234}};
    auto a = srv.post("/v1/chat/completions", b);
    REQUIRE(a.status == 200);
    REQUIRE(a.body["choices"].size() == 3);
    std::set<std::string> texts;
    for (int i = 0; i < 3; ++i) {
      CHECK(a.body["choices"][i]["index"] == i);
      texts.insert(a.body["choices"][i]["message"]["content"].get<std::string>());
    }
    CHECK(texts.size() == 3);
    CHECK(a.body["usage"]["completion_tokens"] == 24);
    CHECK(a.body["usage"]["prompt_tokens"] == 24);  // the prompt counts once
    auto again = srv.post("/v1/chat/completions", b);
    CHECK(again.body["choices"] == a.body["choices"]);
    b["seed"] = 4321;
    auto other = srv.post("/v1/chat/completions", b);
    CHECK(other.body["choices"] != a.body["choices"]);
    // Streaming n choices: each index gets its own role chunk, text and finish.
    b["stream"] = true;
    b["seed"] = 1234;
    auto s = srv.post("/v1/chat/completions", b);
    auto got = collect_stream(parse_sse(s.text), true);
    for (int i = 0; i < 3; ++i) {
      CHECK(got[i].content == a.body["choices"][i]["message"]["content"]);
      CHECK(got[i].finish == "length");
    }
  }
  SECTION("top_k 1, a tiny top_p or min_p 1 leave only the greedy token") {
    for (const Json& extra : {Json{{"top_k", 1}}, Json{{"top_p", 1e-6}}, Json{{"min_p", 1.0}}}) {
      Json b = chat_body(c0["messages"]);
      b["temperature"] = 1.0;
      b["seed"] = 5;
      for (auto& [k, v] : extra.items()) b[k] = v;
      auto r = srv.post("/v1/chat/completions", b);
      REQUIRE(r.status == 200);
      CHECK(r.body["choices"][0]["message"]["content"] == full);
    }
  }
  SECTION("penalties reach the sampler: a huge repetition penalty forbids repeats") {
    Json b = {{"prompt", Json::array({5})}, {"max_tokens", 120}, {"temperature", 0}, {"return_token_ids", true},
              {"ignore_eos", true}};
    auto plain = srv.post("/v1/completions", b);
    REQUIRE(plain.status == 200);
    auto plain_ids = plain.body["choices"][0]["token_ids"].get<std::vector<int32_t>>();
    std::set<int32_t> distinct(plain_ids.begin(), plain_ids.end());
    REQUIRE(distinct.size() < plain_ids.size());  // greedy on random weights loops
    b["repetition_penalty"] = 1000.0;
    auto pen = srv.post("/v1/completions", b);
    auto ids = pen.body["choices"][0]["token_ids"].get<std::vector<int32_t>>();
    CHECK(ids.size() == 120);
    CHECK(std::set<int32_t>(ids.begin(), ids.end()).size() > distinct.size());
    b.erase("repetition_penalty");
    b["frequency_penalty"] = 2.0;
    b["presence_penalty"] = 2.0;
    auto fp = srv.post("/v1/completions", b);
    CHECK(fp.body["choices"][0]["token_ids"] != plain.body["choices"][0]["token_ids"]);
  }
  SECTION("logprobs: the greedy token is the most likely, top_logprobs sorted") {
    Json b = chat_body(c0["messages"]);
    b["logprobs"] = true;
    b["top_logprobs"] = 3;
    auto r = srv.post("/v1/chat/completions", b);
    REQUIRE(r.status == 200);
    const Json& content = r.body["choices"][0]["logprobs"]["content"];
    REQUIRE(content.size() == 24);
    for (const auto& e : content) {
      REQUIRE(e["top_logprobs"].size() == 3);
      CHECK(e["logprob"].get<double>() <= 0.0);
      CHECK(e["logprob"].get<double>() == Approx(e["top_logprobs"][0]["logprob"].get<double>()));
      CHECK(e["top_logprobs"][0]["logprob"].get<double>() >= e["top_logprobs"][1]["logprob"].get<double>());
      CHECK(e["bytes"].is_array());
    }
    // Streamed: the same entries arrive spread over the chunks.
    b["stream"] = true;
    auto s = srv.post("/v1/chat/completions", b);
    size_t n = 0;
    for (const auto& ev : parse_sse(s.text).events)
      if (!ev["choices"].empty() && ev["choices"][0]["logprobs"].is_object())
        n += ev["choices"][0]["logprobs"]["content"].size();
    CHECK(n == 24);
  }
  SECTION("max_completion_tokens, and the text-part form of content") {
    Json b = chat_body(Json::array({Json{{"role", "user"},
                                         {"content", Json::array({Json{{"type", "text"}, {"text", "Hello! Who are you?"}}})}}}));
    b.erase("max_tokens");
    b["max_completion_tokens"] = 3;
    auto r = srv.post("/v1/chat/completions", b);
    REQUIRE(r.status == 200);
    CHECK(r.body["usage"]["completion_tokens"] == 3);
    CHECK(full.rfind(r.body["choices"][0]["message"]["content"].get<std::string>(), 0) == 0);
  }
  SECTION("chat_template_kwargs reach the template (enable_thinking=false closes an empty think block)") {
    auto plain = srv.post("/tokenize", Json{{"messages", hello()}});
    auto off = srv.post("/tokenize", Json{{"messages", hello()}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
    REQUIRE(off.status == 200);
    const auto extra = encode("<think>\n\n</think>\n\n");
    auto want = plain.body["tokens"].get<std::vector<int32_t>>();
    want.insert(want.end(), extra.begin(), extra.end());
    CHECK(off.body["tokens"].get<std::vector<int32_t>>() == want);
    Json b = chat_body(hello(), 4);
    b["chat_template_kwargs"] = {{"enable_thinking", false}};
    CHECK(srv.post("/v1/chat/completions", b).status == 200);
  }
  SECTION("completions: a string, token ids, a batch of prompts times n, logprobs as a count") {
    Json b = {{"prompt", "Hello"}, {"max_tokens", 5}, {"temperature", 0}, {"logprobs", 2}};
    auto r = srv.post("/v1/completions", b);
    REQUIRE(r.status == 200);
    CHECK(r.body["object"] == "text_completion");
    const Json& lp = r.body["choices"][0]["logprobs"];
    CHECK(lp["tokens"].size() == 5);
    CHECK(lp["token_logprobs"].size() == 5);
    CHECK(lp["top_logprobs"][0].size() == 2);
    const std::string text = r.body["choices"][0]["text"];

    auto by_ids = srv.post("/v1/completions", Json{{"prompt", encode("Hello")}, {"max_tokens", 5}, {"temperature", 0}});
    CHECK(by_ids.body["choices"][0]["text"] == text);

    auto batch = srv.post("/v1/completions",
                          Json{{"prompt", Json::array({"Hello", encode("Hello")})}, {"n", 2}, {"max_tokens", 5}, {"temperature", 0}});
    REQUIRE(batch.status == 200);
    REQUIRE(batch.body["choices"].size() == 4);
    for (int i = 0; i < 4; ++i) {
      CHECK(batch.body["choices"][i]["index"] == i);
      CHECK(batch.body["choices"][i]["text"] == text);
    }
    CHECK(batch.body["usage"]["prompt_tokens"] == 2 * r.body["usage"]["prompt_tokens"].get<int>());

    b["stream"] = true;
    b["stream_options"] = {{"include_usage", true}};
    auto s = srv.post("/v1/completions", b);
    auto got = collect_stream(parse_sse(s.text), false);
    CHECK(got[0].content == text);
    CHECK(got[0].finish == "length");
    CHECK(got[-1].usage["completion_tokens"] == 5);
  }
}

TEST_CASE("endpoints: models, health, metrics, tokenize, detokenize, CORS preflight", "[endpoints]") {
  TestServer srv;
  auto models = srv.get("/v1/models");
  REQUIRE(models.status == 200);
  CHECK(models.body["object"] == "list");
  CHECK(models.body["data"][0]["id"] == "tiny-qwen35");
  CHECK(models.body["data"][0]["max_model_len"] == 4096);
  CHECK(srv.get("/v1/models/tiny-qwen35").body["id"] == "tiny-qwen35");
  CHECK(srv.get("/v1/models/other").status == 404);

  auto health = srv.get("/health");
  CHECK(health.status == 200);

  auto tk = srv.post("/tokenize", Json{{"prompt", "Hello world"}, {"return_token_strs", true}});
  REQUIRE(tk.status == 200);
  CHECK(tk.body["tokens"].get<std::vector<int32_t>>() == encode("Hello world"));
  CHECK(tk.body["count"] == tk.body["tokens"].size());
  CHECK(tk.body["token_strs"].size() == tk.body["tokens"].size());
  auto dt = srv.post("/detokenize", Json{{"tokens", tk.body["tokens"]}});
  REQUIRE(dt.status == 200);
  CHECK(dt.body["prompt"] == "Hello world");
  CHECK(srv.post("/detokenize", Json{{"tokens", {5000}}}).status == 400);
  CHECK(srv.post("/v1/tokenize", Json{{"prompt", "x"}}).status == 200);

  CHECK(srv.post("/v1/chat/completions", chat_body(hello(), 3)).status == 200);
  auto m = srv.get("/metrics");
  REQUIRE(m.status == 200);
  for (const char* name :
       {"vllm:num_requests_running", "vllm:num_requests_waiting", "deltaserve:kv_cache_blocks_used",
        "deltaserve:kv_cache_blocks_total", "deltaserve:state_slots_used", "deltaserve:state_slots_total",
        "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:num_preemptions_total",
        "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket", "vllm:request_queue_time_seconds_bucket"})
    CHECK(m.text.find(name) != std::string::npos);
  CHECK(m.text.find("vllm:generation_tokens_total{model_name=\"tiny-qwen35\"} 3\n") != std::string::npos);
  CHECK(m.text.find("vllm:e2e_request_latency_seconds_count{model_name=\"tiny-qwen35\"} 1\n") != std::string::npos);
  CHECK(m.text.find("vllm:inter_token_latency_seconds_count{model_name=\"tiny-qwen35\"} 2\n") != std::string::npos);

  auto c = srv.client();
  auto pre = c.Options("/v1/chat/completions");
  REQUIRE(pre);
  CHECK(pre->status == 204);
  CHECK(pre->get_header_value("Access-Control-Allow-Origin") == "*");
}

TEST_CASE("errors: OpenAI error objects with the right status codes", "[errors]") {
  TestServerConfig cfg;
  cfg.engine.max_ctx = 64;
  cfg.transport.limits.max_body_bytes = 1 << 20;
  TestServer srv(cfg);
  auto expect = [](const TestServer::Reply& r, int status, const std::string& param = {}) {
    CHECK(r.status == status);
    REQUIRE(r.body.is_object());
    REQUIRE(r.body.contains("error"));
    const Json& e = r.body["error"];
    CHECK(e["message"].is_string());
    CHECK(e["type"].is_string());
    CHECK(e.contains("code"));
    if (!param.empty()) CHECK(e["param"] == param);
  };
  expect(srv.post_raw("/v1/chat/completions", "{not json"), 400);
  expect(srv.post_raw("/v1/chat/completions", "[1, 2]"), 400);
  expect(srv.post("/v1/chat/completions", Json{{"model", "gpt-9"}, {"messages", hello()}}), 404, "model");
  CHECK(srv.post("/v1/chat/completions", Json{{"model", "gpt-9"}, {"messages", hello()}}).body["error"]["code"] ==
        "model_not_found");
  expect(srv.get("/v1/nothing"), 404);
  expect(srv.post("/v1/chat/completions", Json{{"messages", "hi"}}), 400, "messages");
  expect(srv.post("/v1/completions", Json{{"prompt", "x"}, {"echo", true}}), 400, "echo");
  expect(srv.post("/v1/completions", Json{{"prompt", "x"}, {"suffix", "y"}}), 400, "suffix");
  expect(srv.post("/v1/chat/completions", Json{{"messages", hello()}, {"response_format", {{"type", "xml"}}}}), 400,
         "response_format");
  expect(srv.post("/v1/chat/completions", Json{{"messages", hello()}, {"tool_choice", "required"}}), 400, "tool_choice");
  expect(srv.post("/v1/chat/completions", Json{{"messages", hello()}, {"n", 17}}), 400, "n");
  expect(srv.post("/v1/chat/completions", Json{{"messages", hello()}, {"temperature", "hot"}}), 400, "temperature");
  // A render error of the chat template (here: `tools` that is not a list) is the client's.
  auto tmpl = srv.post("/v1/chat/completions", Json{{"messages", hello()}, {"chat_template_kwargs", {{"tools", 5}}}});
  expect(tmpl, 400, "messages");
  CHECK(tmpl.body["error"]["code"] == "chat_template_error");
  CHECK(tmpl.body["error"]["message"].get<std::string>().find(DELTASERVE_SOURCE_DIR) == std::string::npos);
  CHECK(tmpl.body["error"]["message"].get<std::string>().find("chat_template.jinja:") != std::string::npos);
  // 400 context_length_exceeded: a prompt longer than max-ctx (64 here), one exactly as long
  // (no room for a reply), and a max_tokens that does not fit beside the prompt; 413: a body
  // over the size limit.
  auto long_prompt = srv.post("/v1/completions", Json{{"prompt", std::vector<int>(100, 5)}, {"max_tokens", 1}});
  expect(long_prompt, 400, "prompt");
  CHECK(long_prompt.body["error"]["code"] == "context_length_exceeded");
  expect(srv.post("/v1/completions", Json{{"prompt", std::vector<int>(64, 5)}}), 400, "prompt");
  auto no_room = srv.post("/v1/completions", Json{{"prompt", std::vector<int>(60, 5)}, {"max_tokens", 5}});
  expect(no_room, 400, "max_tokens");
  CHECK(no_room.body["error"]["message"].get<std::string>().find("65 tokens (60 in the prompt, 5 for the reply)") !=
        std::string::npos);
  CHECK(srv.post("/v1/completions", Json{{"prompt", std::vector<int>(60, 5)}, {"max_tokens", 4}}).status == 200);
  CHECK(srv.post("/v1/completions", Json{{"prompt", std::vector<int>(63, 5)}}).status == 200);
  expect(srv.post_raw("/v1/completions", "{\"prompt\": \"" + std::string(2 << 20, 'a') + "\"}"), 413);
  // Unknown extra fields are ignored.
  CHECK(srv.post("/v1/chat/completions", Json{{"messages", hello()}, {"max_tokens", 1}, {"frobnicate", true}}).status ==
        200);
}

TEST_CASE("errors: 401 with an API key (constant-time check), /health stays open", "[errors]") {
  TestServerConfig cfg;
  cfg.scripted = true;
  cfg.script = encode("ok");
  cfg.api_key = "sekrit-key";
  TestServer srv(cfg);
  httplib::Client anon("127.0.0.1", srv.port());
  auto r = anon.Post("/v1/chat/completions", dump_json(chat_body(hello(), 2)), "application/json");
  REQUIRE(r);
  CHECK(r->status == 401);
  CHECK(Json::parse(r->body)["error"]["type"] == "authentication_error");
  httplib::Client wrong("127.0.0.1", srv.port());
  wrong.set_bearer_token_auth("sekrit-kez");
  CHECK(wrong.Post("/v1/completions", "{\"prompt\": \"x\"}", "application/json")->status == 401);
  wrong.set_bearer_token_auth("sekrit-key-longer");
  CHECK(wrong.Get("/v1/models")->status == 401);
  CHECK(anon.Get("/health")->status == 200);
  CHECK(anon.Get("/metrics")->status == 200);
  CHECK(srv.post("/v1/chat/completions", chat_body(hello(), 2)).status == 200);  // the fixture sends the key
}

TEST_CASE("errors: 503 while loading and while shutting down; 500 when the model fails", "[errors]") {
  {
    TestServerConfig cfg;
    cfg.scripted = true;
    cfg.script = encode("ok");
    cfg.ready = false;
    TestServer srv(cfg);
    auto h = srv.get("/health");
    CHECK(h.status == 503);
    auto c = srv.post("/v1/chat/completions", chat_body(hello(), 2));
    CHECK(c.status == 503);
    CHECK(c.body["error"]["code"] == "model_loading");
    CHECK(srv.get("/v1/models").status == 503);
    CHECK(srv.get("/metrics").status == 200);
  }
  {
    TestServerConfig cfg;
    cfg.scripted = true;
    cfg.script = encode("ok");
    TestServer srv(cfg);
    auto kept = srv.client();
    kept.set_keep_alive(true);
    auto before = kept.Get("/health");
    REQUIRE(before);
    CHECK(before->get_header_value("Connection") != "close");
    srv.http().begin_shutdown();
    CHECK(srv.get("/health").status == 503);
    auto c = srv.post("/v1/chat/completions", chat_body(hello(), 2));
    CHECK(c.status == 503);
    CHECK(c.body["error"]["code"] == "shutting_down");
    // Draining: every reply closes its connection (a proxy must not reuse one that stop() is
    // about to close), and so does the idle kept-alive one.
    CHECK(c.headers.count("Connection") == 1);
    CHECK(c.headers.find("Connection")->second == "close");
    auto after = kept.Get("/health");
    REQUIRE(after);
    CHECK(after->status == 503);
    CHECK(after->get_header_value("Connection") == "close");
  }
  {
    TestServerConfig cfg;
    cfg.scripted = true;
    cfg.script = encode("ok");
    TestServer srv(cfg);
    srv.scripted()->set_fail(true);
    auto c = srv.post("/v1/chat/completions", chat_body(hello(), 2));
    CHECK(c.status == 500);
    CHECK(c.body["error"]["type"] == "server_error");
    Json b = chat_body(hello(), 2);
    b["stream"] = true;
    auto s = srv.post("/v1/chat/completions", b);
    CHECK(s.status == 200);  // the headers were out before the failure
    const auto sse = parse_sse(s.text);
    bool error_event = false;
    for (const auto& ev : sse.events) error_event |= ev.contains("error");
    CHECK(error_event);
    CHECK(sse.done_last);
    CHECK(srv.wait_pools_free());
  }
}

TEST_CASE("load: a flood beyond --max-queue gets 429 with Retry-After, the rest succeed", "[flood]") {
  TestServerConfig cfg;
  cfg.scripted = true;
  cfg.script = encode("abcdefghij");
  cfg.step_delay_ms = 10;
  cfg.engine.scheduler.max_num_seqs = 1;
  cfg.engine.max_queue = 1;
  TestServer srv(cfg);
  constexpr int kClients = 12;
  std::vector<int> status(kClients, 0);
  std::vector<std::string> retry(kClients), body(kClients);
  std::vector<std::thread> threads;
  // The clients only record; Catch's assertions are not thread-safe, so they run after the join.
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      auto c = srv.client();
      Json b = {{"prompt", "x"}, {"max_tokens", 20}, {"ignore_eos", true}};
      auto r = c.Post("/v1/completions", dump_json(b), "application/json");
      if (!r) return;
      status[i] = r->status;
      retry[i] = r->get_header_value("Retry-After");
      body[i] = r->body;
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i)
    if (status[i] == 429) CHECK(Json::parse(body[i])["error"]["type"] == "rate_limit_error");
  const int ok = static_cast<int>(std::count(status.begin(), status.end(), 200));
  const int limited = static_cast<int>(std::count(status.begin(), status.end(), 429));
  CHECK(ok >= 1);
  CHECK(limited >= 1);
  CHECK(ok + limited == kClients);
  for (int i = 0; i < kClients; ++i)
    if (status[i] == 429) CHECK(retry[i] == "1");
  CHECK(srv.metrics().http_count(429) == static_cast<uint64_t>(limited));
  CHECK(srv.wait_pools_free());
}

TEST_CASE("disconnect: a client that goes away cancels its request at once", "[disconnect]") {
  TestServerConfig cfg;
  cfg.scripted = true;
  cfg.script = encode("the quick brown fox jumps over the lazy dog ");
  cfg.step_delay_ms = 10;
  TestServer srv(cfg);
  const Json body = {{"prompt", "go"}, {"max_tokens", 3000}, {"ignore_eos", true}};

  auto wait_running = [&] {
    for (int i = 0; i < 2000 && srv.engine().stats().running == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return srv.engine().stats().running == 1;
  };
  for (const bool stream : {true, false}) {
    INFO("stream = " << stream);
    const auto before = srv.engine().stats();
    Json b = body;
    if (stream) b["stream"] = true;
    RawClient raw(srv.port());
    REQUIRE(raw.ok());
    REQUIRE(raw.send_post("/v1/completions", dump_json(b)));
    if (stream) {
      const std::string got = raw.read_until("data: ", std::chrono::seconds(20));
      REQUIRE(got.find("data: ") != std::string::npos);
    }
    REQUIRE(wait_running());
    const int64_t steps_at_close = srv.scripted()->steps();
    const auto closed_at = std::chrono::steady_clock::now();
    raw.close();
    REQUIRE(srv.wait_pools_free(std::chrono::seconds(10)));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - closed_at).count();
    const int64_t steps_after = srv.scripted()->steps() - steps_at_close;
    const auto after = srv.engine().stats();
    CHECK(after.requests_cancelled_total == before.requests_cancelled_total + 1);
    CHECK(after.blocks_used == 0);
    CHECK(after.slots_used == 0);
    // The engine drops a cancelled request at its next iteration (1-2 steps here when the
    // machine is idle); the slack is for a loaded CI machine or a sanitizer build, where
    // noticing the hang-up can take a few 10 ms steps. Running on would take 3000 steps.
    INFO("steps after the close: " << steps_after << ", seconds: " << seconds);
    CHECK(steps_after <= 10);
    CHECK(seconds < 5.0);
  }
  // Both departures count as aborts in /metrics, the streaming one too.
  const std::string metrics = srv.get("/metrics").text;
  CHECK(metrics.find("vllm:request_success_total{model_name=\"tiny-qwen35\",finished_reason=\"abort\"} 2") !=
        std::string::npos);
}
