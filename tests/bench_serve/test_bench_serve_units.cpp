// bench_serve's parts without a server: SSE framing, the reading of a stream into timings,
// tokens and errors, the metrics as vllm bench serve computes them, the workloads, the
// request bodies, the arrival times and the constrained share of --structured-fraction.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>

#include <unistd.h>

#include "model/grammar/json_schema.h"
#include "model/vision/decode.h"
#include "model/vision/video_decode.h"
#include "programs/bench_serve/bench_options.h"
#include "programs/bench_serve/load_generator.h"
#include "tests/test_paths.h"
#include "programs/bench_serve/openai_client.h"
#include "programs/bench_serve/random_image.h"
#include "programs/bench_serve/random_video.h"
#include "programs/bench_serve/video_timing.h"
#include "programs/bench_serve/request_body.h"
#include "programs/bench_serve/serving_metrics.h"
#include "programs/bench_serve/sse_parser.h"
#include "programs/bench_serve/stream_reader.h"
#include "programs/bench_serve/workload.h"

using namespace ds::bench;
using Clock = StreamReader::Clock;

namespace {

Clock::time_point at_ms(Clock::time_point t0, int ms) { return t0 + std::chrono::milliseconds(ms); }

// A random dataset of n token-id prompts.
BenchOptions random_ids(int n, int input_len, int output_len, int64_t vocab) {
  BenchOptions o;
  o.num_prompts = n;
  o.random_input_len = input_len;
  o.random_output_len = output_len;
  o.random_vocab_size = vocab;
  return o;
}

// o as a multi-turn chat workload of `conversations` x `turns`.
void make_multi_turn(BenchOptions& o, int conversations, int turns) {
  o.dataset = "multi-turn";
  o.endpoint = "/v1/chat/completions";
  o.num_prompts = conversations;
  o.turns = turns;
}

}  // namespace

TEST_CASE("SseParser: events in any split, CRLF/CR/LF, comments, multi-line data", "[sse]") {
  const std::string stream =
      ": keep-alive\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line1\ndata:line2\n\ndata: [DONE]\r\rdata: tail";
  for (size_t split : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, stream.size()}) {
    std::vector<std::string> got;
    SseParser p([&](std::string_view d) { got.emplace_back(d); });
    for (size_t i = 0; i < stream.size(); i += split) p.feed(std::string_view(stream).substr(i, split));
    p.finish();
    INFO("split " << split);
    REQUIRE(got == std::vector<std::string>{"{\"a\":1}", "line1\nline2", "[DONE]", "tail"});
  }
}

TEST_CASE("StreamReader: chat timings skip the role chunk; usage gives the tokens", "[reader]") {
  const auto t0 = Clock::now();
  StreamReader r(true, t0);
  r.on_event(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null})", at_ms(t0, 1));
  r.on_event(R"({"choices":[{"index":0,"delta":{"content":"Hel"}}],"usage":null})", at_ms(t0, 100));
  r.on_event(R"({"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}],"usage":null})", at_ms(t0, 110));
  r.on_event(R"({"choices":[{"index":0,"delta":{"content":"lo"}}],"usage":null})", at_ms(t0, 130));
  r.on_event(R"({"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":null})", at_ms(t0, 131));
  r.on_event(R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}})", at_ms(t0, 132));
  r.on_event("[DONE]", at_ms(t0, 133));
  const RequestResult res = r.finish(at_ms(t0, 140), 200, "", "");
  REQUIRE(res.success);
  CHECK(res.error.empty());
  CHECK(res.ttft == Approx(0.100));
  REQUIRE(res.itl.size() == 2);
  CHECK(res.itl[0] == Approx(0.010));
  CHECK(res.itl[1] == Approx(0.020));
  CHECK(res.latency == Approx(0.140));
  CHECK(res.prompt_tokens == 12);
  CHECK(res.completion_tokens == 4);
  CHECK(res.content == "Hello");
  CHECK(res.finish_reason == "length");
}

TEST_CASE("StreamReader: completions text; output only in the finish chunk", "[reader]") {
  const auto t0 = Clock::now();
  StreamReader r(false, t0);
  r.on_event(R"({"choices":[{"index":0,"text":"","finish_reason":null}]})", at_ms(t0, 5));
  r.on_event(R"({"choices":[{"index":0,"text":"ab","finish_reason":"stop"}]})", at_ms(t0, 50));
  r.on_event(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}})", at_ms(t0, 51));
  r.on_event("[DONE]", at_ms(t0, 51));
  const RequestResult res = r.finish(at_ms(t0, 52), 200, "", "");
  REQUIRE(res.success);
  CHECK(res.ttft == Approx(0.050));
  CHECK(res.itl.empty());
  CHECK(res.content == "ab");

  // No chunk carries text (e.g. only special tokens): TTFT is the finish chunk.
  StreamReader e(false, t0);
  e.on_event(R"({"choices":[{"index":0,"text":"","finish_reason":"stop"}]})", at_ms(t0, 20));
  e.on_event(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}})", at_ms(t0, 21));
  e.on_event("[DONE]", at_ms(t0, 21));
  const RequestResult empty = e.finish(at_ms(t0, 22), 200, "", "");
  REQUIRE(empty.success);
  CHECK(empty.ttft == Approx(0.020));
}

TEST_CASE("StreamReader: every failure is a failure, with its first error", "[reader]") {
  const auto t0 = Clock::now();
  auto usage_and_done = [&](StreamReader& r) {
    r.on_event(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}})", t0);
    r.on_event("[DONE]", t0);
  };
  {
    StreamReader r(false, t0);
    const RequestResult res = r.finish(t0, 404, R"({"error":{"message":"model 'x' not found","type":"x"}})", "");
    CHECK_FALSE(res.success);
    CHECK(res.error == "HTTP 404: model 'x' not found");
  }
  {
    StreamReader r(false, t0);
    const RequestResult res = r.finish(t0, 429, "queue full", "");
    CHECK(res.error == "HTTP 429: queue full");
  }
  {
    StreamReader r(false, t0);
    r.on_event(R"({"choices":[{"index":0,"text":"a"}]})", t0);
    r.on_event(R"({"error":{"message":"generation failed: boom","code":500}})", t0);
    usage_and_done(r);
    const RequestResult res = r.finish(t0, 200, "", "");
    CHECK_FALSE(res.success);
    CHECK(res.error == "error in the stream: generation failed: boom");
  }
  {
    StreamReader r(false, t0);
    r.on_event(R"({"choices":[{"index":0,"text":"a"}]})", t0);
    const RequestResult res = r.finish(t0, 200, "", "Read");
    CHECK_FALSE(res.success);
    CHECK(res.error == "connection: Read");
  }
  {
    StreamReader r(false, t0);
    r.on_event(R"({"choices":[{"index":0,"text":"a"}]})", t0);
    r.on_event(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}})", t0);
    const RequestResult res = r.finish(t0, 200, "", "");
    CHECK(res.error == "the stream ended before \"data: [DONE]\"");
  }
  {
    StreamReader r(false, t0);
    r.on_event(R"({"choices":[{"index":0,"text":"a"}]})", t0);
    r.on_event("[DONE]", t0);
    const RequestResult res = r.finish(t0, 200, "", "");
    CHECK(res.error.find("no usage in the stream") == 0);
  }
  {
    StreamReader r(false, t0);
    r.on_event("not json", t0);
    usage_and_done(r);
    const RequestResult res = r.finish(t0, 200, "", "");
    CHECK(res.error == "malformed stream event: not json");
  }
}

TEST_CASE("percentiles interpolate as numpy does; summary as vllm bench serve", "[metrics]") {
  CHECK(percentile({}, 50) == 0);
  CHECK(percentile({3, 1, 2, 4}, 50) == Approx(2.5));
  CHECK(percentile({1, 2, 3, 4}, 90) == Approx(3.7));
  CHECK(percentile({1, 2, 3, 4}, 99) == Approx(3.97));
  CHECK(percentile({5}, 99) == 5);

  std::vector<RequestResult> rs(4);
  rs[0].success = true, rs[0].ttft = 0.1, rs[0].latency = 1.1, rs[0].completion_tokens = 11, rs[0].prompt_tokens = 100;
  rs[0].itl = {0.1, 0.1};
  rs[1].success = true, rs[1].ttft = 0.3, rs[1].latency = 0.3, rs[1].completion_tokens = 1, rs[1].prompt_tokens = 50;
  rs[1].turn = 1;
  rs[2].error = "HTTP 429: queue full";
  rs[3].error = "HTTP 429: queue full";
  rs[3].turn = 1;
  const ServingMetrics m = summarize(rs, 2.0, true);
  CHECK(m.completed == 2);
  CHECK(m.failed == 2);
  CHECK(m.total_input_tokens == 150);
  CHECK(m.total_output_tokens == 12);
  CHECK(m.request_throughput == Approx(1.0));
  CHECK(m.output_throughput == Approx(6.0));
  CHECK(m.input_throughput == Approx(75.0));
  CHECK(m.total_token_throughput == Approx(81.0));
  CHECK(m.ttft.mean == Approx(200));
  CHECK(m.ttft.std == Approx(100));
  CHECK(m.tpot.count == 1);  // one-token replies have no TPOT
  CHECK(m.tpot.mean == Approx(100));
  CHECK(m.itl.count == 2);
  CHECK(m.e2el.p50 == Approx(700));
  REQUIRE(m.errors.size() == 1);
  CHECK(m.errors[0].error == "HTTP 429: queue full");
  CHECK(m.errors[0].count == 2);
  REQUIRE(m.turns.size() == 2);
  CHECK(m.turns[0].completed == 1);
  CHECK(m.turns[0].failed == 1);
  CHECK(m.turns[1].mean_input_tokens == Approx(50));
  CHECK(m.turns[1].ttft.mean == Approx(300));
}

TEST_CASE("workloads: lengths, groups, conversations, files", "[workload]") {
  BenchOptions o = random_ids(6, 20, 5, 100);
  {
    const auto s = build_workload(o);
    REQUIRE(s.size() == 6);
    for (const auto& x : s) {
      REQUIRE(x.turns.size() == 1);
      REQUIRE(x.turns[0].input.is_array());
      CHECK(x.turns[0].input.size() == 20);
      for (const auto& id : x.turns[0].input) CHECK((id.get<int>() >= 0 && id.get<int>() < 100));
      CHECK(x.turns[0].max_tokens == 5);
    }
    CHECK(s[0].turns[0].input != s[1].turns[0].input);
    CHECK(build_workload(o)[3].turns[0].input == s[3].turns[0].input);  // seeded
  }
  SECTION("range ratio") {
    o.random_range_ratio = 0.5;
    o.num_prompts = 200;
    int lo = 1000, hi = 0;
    for (const auto& x : build_workload(o)) {
      lo = std::min(lo, static_cast<int>(x.turns[0].input.size()));
      hi = std::max(hi, static_cast<int>(x.turns[0].input.size()));
    }
    CHECK(lo >= 10);
    CHECK(hi <= 30);
    CHECK(hi > lo);
  }
  SECTION("chat: one user message of words") {
    o.endpoint = "/v1/chat/completions";
    const auto s = build_workload(o);
    const Json& m = s[0].turns[0].input;
    REQUIRE(m.size() == 1);
    CHECK(m[0]["role"] == "user");
    const std::string text = m[0]["content"];
    CHECK(std::count(text.begin(), text.end(), ' ') == 19);
  }
  SECTION("shared-prefix: G prefixes of P ids, S unique ids after") {
    o.dataset = "shared-prefix";
    o.shared_prefix_groups = 2;
    o.shared_prefix_len = 8;
    o.shared_suffix_len = 3;
    const auto s = build_workload(o);
    REQUIRE(s.size() == 6);
    auto prefix = [&](size_t i) {
      const Json& in = s[i].turns[0].input;
      REQUIRE(in.size() == 11);
      return Json(std::vector<Json>(in.begin(), in.begin() + 8));
    };
    CHECK(prefix(0) == prefix(2));
    CHECK(prefix(0) == prefix(4));
    CHECK(prefix(1) == prefix(3));
    CHECK(prefix(0) != prefix(1));
    CHECK(s[0].turns[0].input != s[2].turns[0].input);
  }
  SECTION("multi-turn: history with the replies") {
    make_multi_turn(o, 2, 3);
    o.system_prompt_len = 4;
    const auto s = build_workload(o);
    REQUIRE(s.size() == 2);
    REQUIRE(s[0].turns.size() == 3);
    CHECK(s[0].conversation);
    CHECK(s[0].system_prompt == s[1].system_prompt);
    const Json m = conversation_messages(s[0], {"r1", "r2"}, 2);
    REQUIRE(m.size() == 6);
    CHECK(m[0]["role"] == "system");
    CHECK(m[1]["content"] == s[0].turns[0].input);
    CHECK(m[2] == Json({{"role", "assistant"}, {"content", "r1"}}));
    CHECK(m[4]["content"] == "r2");
    CHECK(m[5]["content"] == s[0].turns[2].input);
    CHECK(count_requests(s) == 6);
  }
  SECTION("agent: conversations grow to the target by tool outputs") {
    o.dataset = "agent";
    o.endpoint = "/v1/chat/completions";
    o.agent_sessions = 3;
    o.agent_max_tokens = 1000;
    o.turns = 4;
    o.system_prompt_len = 100;
    o.random_output_len = 25;
    REQUIRE(validate_options(o).empty());
    const auto s = build_workload(o);
    REQUIRE(s.size() == 3);
    for (const auto& c : s) {
      CHECK(c.conversation);
      CHECK(c.system_prompt == s[0].system_prompt);
      REQUIRE(c.turns.size() == 4);
      int64_t context = o.system_prompt_len;
      for (const auto& t : c.turns) {
        CHECK(t.max_tokens == 25);
        CHECK(t.nominal_input_len == (1000 - 100) / 4 - 25);
        context += t.nominal_input_len + t.max_tokens;
      }
      CHECK(context <= 1000);
      CHECK(context > 1000 - 4);  // the rounding of the per-turn share
    }
    CHECK(s[0].turns[0].input != s[1].turns[0].input);
    // Lengths drawn from a range: each conversation reaches its own, within it, and they differ.
    o.agent_sessions = 16;
    o.agent_min_tokens = 600;
    REQUIRE(validate_options(o).empty());
    std::set<int64_t> lengths;
    for (const auto& c : build_workload(o)) {
      int64_t context = o.system_prompt_len;
      for (const auto& t : c.turns) context += t.nominal_input_len + t.max_tokens;
      CHECK(context <= 1000);
      CHECK(context > 600 - 4);
      lengths.insert(context);
    }
    CHECK(lengths.size() > 4);
    o.agent_min_tokens = 1200;  // above the max
    CHECK_FALSE(validate_options(o).empty());
    o.agent_min_tokens = 150;  // cannot hold the turns
    CHECK_FALSE(validate_options(o).empty());
    o.agent_min_tokens = 0;
    o.agent_max_tokens = 200;  // cannot hold 4 turns of 25-token replies beside the system prompt
    CHECK_FALSE(validate_options(o).empty());
    o.endpoint = "/v1/completions";
    o.agent_max_tokens = 1000;
    CHECK_FALSE(validate_options(o).empty());
  }
  SECTION("file") {
    const std::string path = ds::test::temp_path("ds_bench_units_" + std::to_string(::getpid()) + ".jsonl");
    {
      std::ofstream f(path);
      f << R"({"prompt": "hello there", "max_tokens": 3})" << "\n\n"
        << R"({"prompt": [1, 2, 3]})" << "\n";
    }
    o.dataset = "file";
    o.dataset_path = path;
    auto s = build_workload(o);
    REQUIRE(s.size() == 2);
    CHECK(s[0].turns[0].input == "hello there");
    CHECK(s[0].turns[0].max_tokens == 3);
    CHECK(s[1].turns[0].input == Json({1, 2, 3}));
    CHECK(s[1].turns[0].max_tokens == 5);  // --random-output-len
    o.num_prompts_given = true;
    o.num_prompts = 5;
    s = build_workload(o);
    REQUIRE(s.size() == 5);
    CHECK(s[4].turns[0].input == "hello there");
    o.endpoint = "/v1/chat/completions";
    CHECK_THROWS_WITH(build_workload(o), Catch::Contains(":3: a token-id \"prompt\" needs --endpoint /v1/completions"));
    {
      std::ofstream f(path);
      f << R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 2})" << "\n{oops\n";
    }
    CHECK_THROWS_WITH(build_workload(o), Catch::Contains(":2: not JSON"));
    std::remove(path.c_str());
  }
}

TEST_CASE("request bodies stream with usage; --extra-body overrides", "[body]") {
  BenchOptions o;
  o.ignore_eos = true;
  o.temperature = 0.0;
  o.extra_body = R"({"top_k": 5, "stream_options": {"include_usage": true, "continuous_usage_stats": false}})";
  const RequestBody c(o, "m");
  const Json a = Json::parse(c.make(Json({1, 2}), 7));
  CHECK(a["model"] == "m");
  CHECK(a["prompt"] == Json({1, 2}));
  CHECK(a["max_tokens"] == 7);
  CHECK(a["stream"] == true);
  CHECK(a["stream_options"]["include_usage"] == true);
  CHECK(a["ignore_eos"] == true);
  CHECK(a["temperature"] == 0.0);
  CHECK(a["top_k"] == 5);
  // --lora-modules: a request names its adapter as its model.
  CHECK(Json::parse(c.make(Json({1, 2}), 7, false, "lora3"))["model"] == "lora3");
  o.endpoint = "/v1/chat/completions";
  o.extra_body.clear();
  const RequestBody chat(o, "m");
  const Json b = Json::parse(chat.make(Json::array({{{"role", "user"}, {"content", "x"}}}), 3));
  CHECK(b["max_completion_tokens"] == 3);
  CHECK(b["messages"][0]["content"] == "x");
  CHECK(chat.route() == "/v1/chat/completions");
  o.extra_body = "[1]";
  CHECK_THROWS(RequestBody(o, "m"));
}

TEST_CASE("structured fraction: a seeded share of the requests, the same prompts", "[structured]") {
  BenchOptions o = random_ids(40, 4, 3, 50);
  auto constrained = [](const std::vector<Session>& s) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i].turns[0].structured) idx.push_back(i);
    return idx;
  };
  const auto none = build_workload(o);
  CHECK(constrained(none).empty());
  o.structured_fraction = 0.5;
  const auto half = build_workload(o);
  const auto picked = constrained(half);
  CHECK(picked.size() == 20);
  CHECK(picked.front() < 20);  // spread, not the first 20
  CHECK(picked.back() >= 20);
  for (size_t i = 0; i < half.size(); ++i) REQUIRE(half[i].turns[0].input == none[i].turns[0].input);
  CHECK(constrained(build_workload(o)) == picked);  // seeded
  o.seed = 9;
  CHECK(constrained(build_workload(o)) != picked);
  o.structured_fraction = 0.33;
  CHECK(constrained(build_workload(o)).size() == 13);  // round(0.33 x 40)
  o.structured_fraction = 1;
  CHECK(constrained(build_workload(o)).size() == 40);
  SECTION("multi-turn: each turn is a request") {
    make_multi_turn(o, 5, 4);
    o.structured_fraction = 0.25;
    size_t n = 0;
    for (const auto& s : build_workload(o))
      for (const auto& t : s.turns) n += t.structured;
    CHECK(n == 5);
  }
}

TEST_CASE("structured bodies: response_format for chat, structured_outputs for completions", "[structured]") {
  BenchOptions o;
  o.structured_fraction = 0.5;
  const RequestBody c(o, "m");
  const Json plain = Json::parse(c.make(Json({1, 2}), 7, false));
  CHECK_FALSE(plain.contains("structured_outputs"));
  const Json constrained = Json::parse(c.make(Json({1, 2}), 7, true));
  REQUIRE(constrained["structured_outputs"]["json"].is_object());
  CHECK(constrained["prompt"] == Json({1, 2}));
  CHECK(constrained["max_tokens"] == 7);

  o.endpoint = "/v1/chat/completions";
  const RequestBody chat(o, "m");
  const Json messages = Json::array({{{"role", "user"}, {"content", "x"}}});
  CHECK_FALSE(Json::parse(chat.make(messages, 3, false)).contains("response_format"));
  const Json rf = Json::parse(chat.make(messages, 3, true))["response_format"];
  CHECK(rf["type"] == "json_schema");
  const Json schema = rf["json_schema"]["schema"];
  CHECK(schema == constrained["structured_outputs"]["json"]);
  // Bounded: every string has a maxLength and the array a maxItems, so that a random model's
  // reply ends; and our own grammar compiler takes it.
  CHECK(schema["properties"]["tags"]["maxItems"] == 3);
  for (const auto& [name, p] : schema["properties"].items())
    if (p["type"] == "string" && !p.contains("enum")) CHECK(p.contains("maxLength"));
  CHECK_NOTHROW(ds::grammar::json_schema_grammar_from_text(schema.dump()));

  o.structured_body = R"({"response_format": {"type": "json_object"}})";
  o.extra_body = R"({"temperature": 0.5, "response_format": {"type": "json_object", "x": 1}})";
  const Json custom = Json::parse(RequestBody(o, "m").make(messages, 3, true));
  CHECK(custom["response_format"] == Json({{"type", "json_object"}, {"x", 1}}));  // --extra-body last
  CHECK(custom["temperature"] == 0.5);
  o.structured_body = "[]";
  CHECK_THROWS_WITH(RequestBody(o, "m"), Catch::Contains("--structured-body"));
}

TEST_CASE("structured metrics: each class counted, its lengths and TPOT apart", "[structured]") {
  std::vector<RequestResult> rs(5);
  for (auto& r : rs) r.success = true, r.ttft = 0.1, r.finish_reason = "stop";
  rs[0].structured = true, rs[0].completion_tokens = 11, rs[0].latency = 1.1;  // TPOT 100 ms
  rs[1].structured = true, rs[1].completion_tokens = 21, rs[1].latency = 0.5;  // 20 ms
  rs[2].structured = true, rs[2].success = false, rs[2].error = "HTTP 400: bad schema";
  rs[3].completion_tokens = 5, rs[3].latency = 0.5, rs[3].finish_reason = "length";  // 100 ms
  rs[4].completion_tokens = 3, rs[4].latency = 0.3, rs[4].finish_reason = "length";  // 100 ms
  const ServingMetrics m = summarize(rs, 1.0, false);
  CHECK(m.structured.requests == 3);
  CHECK(m.structured.completed == 2);
  CHECK(m.structured.failed == 1);
  CHECK(m.structured.finished_by_length == 0);
  CHECK(m.structured.output_tokens == 32);
  CHECK(m.structured.tpot.mean == Approx(60));
  CHECK(m.unstructured.requests == 2);
  CHECK(m.unstructured.finished_by_length == 2);
  CHECK(m.unstructured.output_tokens == 8);
  CHECK(m.unstructured.tpot.p50 == Approx(100));
  CHECK(m.total_output_tokens == 40);
  CHECK(m.tpot.count == 4);
}

TEST_CASE("arrivals: all at once for inf, Poisson otherwise; base URLs", "[load]") {
  const auto burst = arrival_times(5, std::numeric_limits<double>::infinity(), 1);
  CHECK(burst == std::vector<double>(5, 0.0));
  const auto p = arrival_times(20001, 100.0, 7);
  CHECK(p[0] == 0);
  for (size_t i = 1; i < p.size(); ++i) REQUIRE(p[i] >= p[i - 1]);
  CHECK(p.back() / 20000.0 == Approx(0.01).epsilon(0.05));  // mean gap 1 / rate

  const ServerAddress a = parse_base_url("http://127.0.0.1:8000");
  CHECK(a.origin == "http://127.0.0.1:8000");
  CHECK(a.prefix.empty());
  const ServerAddress b = parse_base_url("https://example.com/proxy/");
  CHECK(b.origin == "https://example.com");
  CHECK(b.prefix == "/proxy");
  CHECK_THROWS(parse_base_url("localhost:8000"));
}

TEST_CASE("options: inconsistent flags are refused by name", "[options]") {
  BenchOptions o;
  CHECK(validate_options(o).empty());
  o.dataset = "multi-turn";
  CHECK(validate_options(o).find("--endpoint /v1/chat/completions") != std::string::npos);
  o = BenchOptions{};
  o.dataset = "file";
  CHECK(validate_options(o) == "--dataset file needs --dataset-path");
  o = BenchOptions{};
  o.endpoint = "/v1/responses";
  CHECK(validate_options(o).rfind("--endpoint", 0) == 0);
  o = BenchOptions{};
  o.random_range_ratio = 1.0;
  CHECK(validate_options(o).rfind("--random-range-ratio", 0) == 0);
  o = BenchOptions{};
  o.request_rate = 0;
  CHECK(validate_options(o).rfind("--request-rate", 0) == 0);
  o = BenchOptions{};
  o.structured_fraction = 1.5;
  CHECK(validate_options(o).rfind("--structured-fraction", 0) == 0);
  o.structured_fraction = 0;
  o.structured_body = "{}";
  CHECK(validate_options(o).rfind("--structured-body", 0) == 0);
  o = BenchOptions{};
  o.image_size = "64x48";
  CHECK(validate_options(o).find("/v1/chat/completions") != std::string::npos);
  o.endpoint = "/v1/chat/completions";
  CHECK(validate_options(o).empty());
  for (const char* bad : {"64", "x48", "64x", "0x4", "64x48x2", "-1x4", "99999x2"}) {
    o.image_size = bad;
    CHECK(validate_options(o).rfind("--image-size", 0) == 0);
  }
  o = BenchOptions{};
  o.images_per_request = 2;
  CHECK(validate_options(o).rfind("--images-per-request", 0) == 0);
}

namespace {

std::vector<uint8_t> from_base64(const std::string& s) {
  static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    acc = (acc << 6) | static_cast<uint32_t>(kAlphabet.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>(acc >> bits));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("images: N distinct JPEGs of WxH before the text of each chat request", "[images]") {
  BenchOptions o;
  o.endpoint = "/v1/chat/completions";
  o.num_prompts = 3;
  o.random_input_len = 5;
  o.image_size = "70x33";
  o.images_per_request = 2;
  REQUIRE(validate_options(o).empty());
  const auto sessions = build_workload(o);
  REQUIRE(sessions.size() == 3);
  std::set<std::string> urls;
  for (const auto& s : sessions) {
    const Json& content = s.turns.at(0).input.at(0).at("content");
    REQUIRE(content.is_array());
    REQUIRE(content.size() == 3);
    CHECK(content[2]["type"] == "text");
    for (int k = 0; k < 2; ++k) {
      CHECK(content[k]["type"] == "image_url");
      const std::string url = content[k]["image_url"]["url"];
      const std::string prefix = "data:image/jpeg;base64,";
      REQUIRE(url.rfind(prefix, 0) == 0);
      urls.insert(url);
      const auto bytes = from_base64(url.substr(prefix.size()));
      const ds::vision::RgbImage img = ds::vision::decode_image(bytes);
      CHECK(img.width == 70);
      CHECK(img.height == 33);
    }
  }
  CHECK(urls.size() == 6);  // no image repeats: a server's encoder cache never hits
  // The same seed, the same images.
  CHECK(build_workload(o)[1].turns[0].input == sessions[1].turns[0].input);
  // Base64 of every length remainder decodes back.
  for (size_t n : {0u, 1u, 2u, 3u, 4u, 5u}) {
    std::vector<uint8_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 97 + 1);
    const std::string url = jpeg_data_url(b);
    CHECK(from_base64(url.substr(url.find(',') + 1)) == b);
  }
  // shared-prefix keeps its system prefix and puts the images in the user message.
  o.dataset = "shared-prefix";
  o.images_per_request = 0;  // --image-size alone: one image
  const auto shared = build_workload(o);
  CHECK(shared[0].turns[0].input.at(0)["role"] == "system");
  CHECK(shared[0].turns[0].input.at(1)["content"].size() == 2);
}

TEST_CASE("video: a synthetic MP4 of S seconds at WxH before the text, distinct clips in turn", "[images]") {
  BenchOptions o;
  o.endpoint = "/v1/chat/completions";
  o.num_prompts = 3;
  o.random_input_len = 5;
  o.video_seconds = 1.5;
  o.video_size = "96x64";
  o.video_fps = 10;
  REQUIRE(validate_options(o).empty());
  const auto sessions = build_workload(o);
  std::set<std::string> urls;
  for (const auto& s : sessions) {
    const Json& content = s.turns.at(0).input.at(0).at("content");
    REQUIRE(content.size() == 2);
    CHECK(content[0]["type"] == "video_url");
    CHECK(content[1]["type"] == "text");
    const std::string url = content[0]["video_url"]["url"];
    const std::string prefix = "data:video/mp4;base64,";
    REQUIRE(url.rfind(prefix, 0) == 0);
    urls.insert(url);
    // FFmpeg's own demuxer and decoder (the server's, model/vision) read it back: 15 frames of
    // 96x64 at 10 fps, and the frames move.
    const auto bytes = from_base64(url.substr(prefix.size()));
    const ds::vision::DecodedVideo v = ds::vision::decode_video(bytes, {}, [](const ds::vision::VideoStreamInfo& i) {
      return std::vector<int64_t>{0, i.total_frames - 1};
    });
    CHECK(v.info.total_frames == 15);
    CHECK(v.info.fps == Approx(10));
    CHECK(v.info.width == 96);
    CHECK(v.info.height == 64);
    CHECK(v.frames[0].rgb != v.frames[1].rgb);
  }
  CHECK(urls.size() == 3);
  const ds::bench::VideoHostTiming t = ds::bench::time_video_host(ds::bench::random_mp4(96, 64, 3, 10, 5), 1);
  CHECK(t.total_frames == 30);
  CHECK(t.kept_frames == 6);  // 2 fps of 3 s
  CHECK(t.pairs == 3);
  // Refusals by name.
  BenchOptions bad = o;
  bad.video_size = "95x64";
  CHECK(validate_options(bad).find("--video-size") != std::string::npos);
  bad = o;
  bad.video_seconds = 0;
  CHECK(validate_options(bad).find("--video-seconds") != std::string::npos);
  bad = o;
  bad.endpoint = "/v1/completions";
  CHECK(validate_options(bad).find("chat") != std::string::npos);
}
