// Request validation, option checks and the Prometheus text, without a server.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>

#include <CLI/CLI.hpp>

#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/metrics.h"
#include "server/request_params.h"
#include "server/server_options.h"
#include "server/speculative_option.h"
#include "tests/model/st_writer.h"

using namespace ds::server;

namespace {

// The field a 400 names, or "" when the body is accepted.
std::string refused_param(const std::string& body_text, Endpoint ep = Endpoint::chat) {
  try {
    parse_generation_params(Json::parse(body_text), ep, GenerationDefaults{}, 1024);
  } catch (const ApiError& e) {
    REQUIRE(e.status() == 400);
    return e.param().empty() ? "?" : e.param();
  }
  return {};
}

}  // namespace

TEST_CASE("generation params: values are read and bad ones are refused by name", "[params]") {
  const auto p = parse_generation_params(
      Json::parse(R"({"n": 3, "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 5, "min_p": 0.1,
                      "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.2, "seed": 42,
                      "logit_bias": {"17": 5.5}, "stop": ["a", "b"], "stop_token_ids": [3], "ignore_eos": true,
                      "logprobs": true, "top_logprobs": 4, "stream": true,
                      "stream_options": {"include_usage": true}})"),
      Endpoint::chat, GenerationDefaults{}, 1024);
  CHECK(p.n == 3);
  CHECK(*p.max_tokens == 7);
  CHECK(p.sampling.temperature == 0.5f);
  CHECK(p.sampling.top_k == 5);
  CHECK(*p.sampling.seed == 42u);
  REQUIRE(p.sampling.logit_bias.size() == 1);
  CHECK(p.sampling.logit_bias[0].token == 17);
  CHECK(p.stop == std::vector<std::string>{"a", "b"});
  CHECK(p.stop_token_ids == std::vector<int32_t>{3});
  CHECK(p.ignore_eos);
  CHECK(p.sampling.logprobs);
  CHECK(p.sampling.top_logprobs == 4);
  CHECK(p.include_usage);

  CHECK(refused_param(R"({"n": 17})") == "n");
  CHECK(refused_param(R"({"n": 0})") == "n");
  CHECK(refused_param(R"({"max_tokens": 0})") == "max_tokens");
  CHECK(refused_param(R"({"max_completion_tokens": "x"})") == "max_completion_tokens");
  CHECK(refused_param(R"({"temperature": -1})") == "temperature");
  CHECK(refused_param(R"({"top_p": 0})") == "top_p");
  CHECK(refused_param(R"({"top_k": -2})") == "top_k");
  CHECK(refused_param(R"({"min_p": 2})") == "min_p");
  CHECK(refused_param(R"({"presence_penalty": 3})") == "presence_penalty");
  CHECK(refused_param(R"({"frequency_penalty": -3})") == "frequency_penalty");
  CHECK(refused_param(R"({"repetition_penalty": 0})") == "repetition_penalty");
  CHECK(refused_param(R"({"logit_bias": {"abc": 1}})") == "logit_bias");
  CHECK(refused_param(R"({"logit_bias": {"5000": 1}})") == "logit_bias");
  CHECK(refused_param(R"({"logit_bias": {"5": 101}})") == "logit_bias");
  CHECK(refused_param(R"({"stop": [""]})") == "stop");
  CHECK(refused_param(R"({"stop": 5})") == "stop");
  CHECK(refused_param(R"({"stop_token_ids": [1024]})") == "stop_token_ids");
  CHECK(refused_param(R"({"top_logprobs": 3})") == "top_logprobs");
  CHECK(refused_param(R"({"logprobs": true, "top_logprobs": 21})") == "top_logprobs");
  CHECK(refused_param(R"({"stream_options": {"include_usage": true}})") == "stream_options");
  CHECK(refused_param(R"({"json_schema": {"type": "object"}})") == "json_schema");
  CHECK(refused_param(R"({"best_of": 2})") == "best_of");
  CHECK(refused_param(R"({"min_tokens": 4})") == "min_tokens");
  CHECK(refused_param(R"({"regex": "a+"})") == "regex");
  CHECK(refused_param(R"({"logprobs": 21})", Endpoint::completions) == "logprobs");
  // Unknown fields and harmless OpenAI fields are ignored.
  CHECK(refused_param(R"({"user": "u", "metadata": {}, "store": false, "whatever": 1,
                          "response_format": {"type": "text"}})")
            .empty());
  // Integers may arrive as 2.0 from JavaScript.
  CHECK(refused_param(R"({"n": 2.0})").empty());
  // Out of range for the engine's types: refused by name, not wrapped or turned into inf.
  CHECK(refused_param(R"({"min_tokens": 100000000000000000000})") == "min_tokens");
  CHECK(refused_param(R"({"min_tokens": 18446744073709551615})") == "min_tokens");
  CHECK(refused_param(R"({"min_tokens": -1})") == "min_tokens");
  CHECK(refused_param(R"({"seed": 18446744073709551615})") == "seed");
  CHECK(refused_param(R"({"max_tokens": 1e300})") == "max_tokens");
  CHECK(refused_param(R"({"temperature": 1e308})") == "temperature");
  CHECK(refused_param(R"({"repetition_penalty": 1e308})") == "repetition_penalty");
  CHECK(refused_param(R"({"top_k": 1e12})") == "top_k");
  CHECK(refused_param(R"({"min_tokens": 0, "temperature": 1e30})").empty());
}

TEST_CASE("generation params: one range rule for requests and generation_config.json", "[params]") {
  using ds::server::sampling_range_error;
  CHECK(sampling_range_error("top_p", 7).find("'top_p'") == 0);
  CHECK(sampling_range_error("top_p", 0.5).empty());
  CHECK_FALSE(sampling_range_error("temperature", -0.1).empty());
  CHECK_FALSE(sampling_range_error("temperature", 1e308).empty());
  CHECK_FALSE(sampling_range_error("top_k", 2.5).empty());
  CHECK(sampling_range_error("top_k", -1).empty());
  CHECK_FALSE(sampling_range_error("min_p", 1.5).empty());
  CHECK_FALSE(sampling_range_error("repetition_penalty", 0).empty());
}

TEST_CASE("generation params: the model's generation_config supplies omitted defaults", "[params]") {
  GenerationDefaults d;
  d.temperature = 0.6f;
  d.top_k = 20;
  d.top_p = 0.95f;
  auto p = parse_generation_params(Json::parse("{}"), Endpoint::chat, d, 1024);
  CHECK(p.sampling.temperature == 0.6f);
  CHECK(p.sampling.top_k == 20);
  CHECK(p.sampling.top_p == 0.95f);
  p = parse_generation_params(Json::parse(R"({"temperature": 0, "top_k": -1})"), Endpoint::chat, d, 1024);
  CHECK(p.sampling.temperature == 0.0f);
  CHECK(p.sampling.top_k == 0);
}

TEST_CASE("chat messages: normalised for the template, bad ones refused by name", "[params]") {
  const Json m = normalize_messages(Json::parse(R"([
    {"role": "developer", "content": "be brief"},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "assistant", "content": null, "reasoning": "thought",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "42"}])"));
  CHECK(m[0]["role"] == "system");
  CHECK(m[1]["content"] == "a\nb");
  CHECK(m[2]["content"] == "");
  CHECK(m[2]["reasoning_content"] == "thought");
  CHECK(m[2]["tool_calls"][0]["function"]["arguments"] == Json::parse(R"({"x": 1})"));
  CHECK(m[3]["tool_call_id"] == "c1");

  auto refused = [](const char* text) -> std::string {
    try {
      normalize_messages(Json::parse(text));
    } catch (const ApiError& e) {
      return e.param();
    }
    return {};
  };
  CHECK(refused("[]") == "messages");
  CHECK(refused(R"([{"role": "wizard", "content": "x"}])") == "messages[0].role");
  CHECK(refused(R"([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])") ==
        "messages[0].content[0].type");
  CHECK(refused(R"([{"role": "user"}])") == "messages[0].content");
  CHECK(refused(R"([{"role": "user", "content": [{"type": [{"role": "user"}]}]}])") == "messages[0].content[0].type");
  CHECK(refused(R"([{"role": "assistant", "content": "",
                     "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}])") ==
        "messages[0].tool_calls[0].function.arguments");
}

TEST_CASE("options: each flag parsed once to its type; combinations that cannot work", "[options]") {
  CHECK(parse_bytes("1073741824") == 1073741824);
  CHECK(parse_bytes("1GiB") == 1073741824);
  CHECK(parse_bytes("512MiB") == 536870912);
  CHECK(parse_bytes("2G") == 2000000000);
  CHECK(parse_bytes("1.5Ki") == 1536);
  CHECK_THROWS_AS(parse_bytes("lots"), std::invalid_argument);
  CHECK_THROWS_AS(parse_bytes("5 parsecs"), std::invalid_argument);
  CHECK_THROWS_AS(parse_bytes("-1G"), std::invalid_argument);
  CHECK(parse_backend("cuda") == BackendChoice::cuda);
  CHECK(parse_backend("auto") == BackendChoice::automatic);
  CHECK_THROWS_WITH(parse_backend("tpu"), Catch::Contains("--backend must be"));
  CHECK_FALSE(parse_kv_cache_dtype("auto").has_value());
  CHECK(parse_kv_cache_dtype("q8_0") == ds::DType::q8_0);
  CHECK_THROWS_WITH(parse_kv_cache_dtype("int3"), Catch::Contains("--kv-cache-dtype"));
  CHECK(parse_recurrent_state_dtype("auto") == ds::DType::f32);
  CHECK(parse_recurrent_state_dtype("bfloat16") == ds::DType::bf16);
  CHECK_THROWS_WITH(parse_recurrent_state_dtype("float16"),
                    Catch::Contains("--mamba-ssm-cache-dtype must be auto, float32 or bfloat16"));
  // --quantization's parser is the model's (weights.h): one spelling for serve, refcheck and the benchmarks.
  CHECK(ds::qwen35::parse_quantization("fp8") == ds::qwen35::Quantization::fp8);
  CHECK(ds::qwen35::parse_quantization("gptq") == ds::qwen35::Quantization::gptq);
  CHECK_THROWS_WITH(ds::qwen35::parse_quantization("int4"),
                    Catch::Contains("--quantization must be none, fp8, gptq or awq"));
  CHECK_FALSE(parse_fp8_weights_resident("bf16"));
  CHECK_THROWS_WITH(parse_fp8_weights_resident("fp16"), Catch::Contains("--fp8-weights must be bf16 or resident"));

  // The command line: each value lands typed, a bad one is refused naming its flag.
  auto parsed = [](std::vector<std::string> args) {
    ServerOptions o;
    CLI::App app;
    add_server_options(app, o);
    std::reverse(args.begin(), args.end());  // CLI11 reads the vector from its back
    app.parse(args);
    return o;
  };
  const ServerOptions t = parsed({"--kv-cache-memory", "2GiB", "--kv-cache-dtype", "f16", "--backend", "cpu",
                                  "--speculative-config", R"({"method": "ngram", "num_speculative_tokens": 2})",
                                  "--fp8-weights", "bf16", "--mamba-ssm-cache-dtype", "bfloat16"});
  CHECK(t.kv_cache_memory == int64_t{2} << 30);
  CHECK(t.kv_cache_dtype == ds::DType::f16);
  CHECK(t.backend == BackendChoice::cpu);
  CHECK(t.speculative.method == "ngram");
  CHECK(t.speculative.num_speculative_tokens == 2);
  CHECK_FALSE(t.fp8_weights_resident);
  CHECK(t.recurrent_state_dtype == ds::DType::bf16);
  CHECK(t.kv_offload_memory == 0);
  CHECK(parsed({"--kv-offload-memory", "64GiB"}).kv_offload_memory == int64_t{64} << 30);
  CHECK_THROWS_WITH((parsed({"--kv-offload-memory", "plenty"})), Catch::Contains("--kv-offload-memory"));
  CHECK_THROWS_WITH((parsed({"--kv-cache-memory", "big"})), Catch::Contains("--kv-cache-memory"));
  CHECK_THROWS_WITH((parsed({"--speculative-config", "{}"})), Catch::Contains("--speculative-config"));
  CHECK(parsed({"--quantization", "awq"}).quantization == ds::qwen35::Quantization::awq);
  CHECK_THROWS_WITH((parsed({"--quantization", "int4"})), Catch::Contains("--quantization must be none, fp8, gptq or awq"));

  ServerOptions ok;
  CHECK(validate_options(ok).empty());
  auto bad = [](auto edit) {
    ServerOptions o;
    edit(o);
    return validate_options(o);
  };
  // --backend auto takes it (the loader refuses it if auto ends up on the cpu); cpu never does.
  CHECK(bad([](ServerOptions& o) { o.gpu_memory_utilization = 0.9; }).empty());
  CHECK(bad([](ServerOptions& o) {
          o.backend = BackendChoice::cpu;
          o.gpu_memory_utilization = 0.9;
        }).find("--gpu-memory-utilization") != std::string::npos);
  CHECK(bad([](ServerOptions& o) {
          o.backend = BackendChoice::cuda;
          o.gpu_memory_utilization = 0.9;
          o.kv_cache_memory = int64_t{1} << 30;
        }).find("not both") != std::string::npos);
  CHECK(bad([](ServerOptions& o) {
          o.backend = BackendChoice::cuda;
          o.gpu_memory_utilization = 1.5;
        }).find("(0, 1]") != std::string::npos);
  CHECK(bad([](ServerOptions& o) { o.port = 70000; }).find("--port") != std::string::npos);
  CHECK(bad([](ServerOptions& o) { o.block_size = 0; }).find("--block-size") != std::string::npos);
  CHECK(bad([](ServerOptions& o) { o.max_num_seqs = 0; }).find("--max-num-seqs") != std::string::npos);
  CHECK(bad([](ServerOptions& o) {
          o.prefix_caching = false;
          o.prefix_cache_state_memory = 1 << 20;
        }).find("--prefix-cache-state-memory needs prefix caching") != std::string::npos);
  CHECK(bad([](ServerOptions& o) {
          o.prefix_caching = false;
          o.kv_offload_memory = 1 << 30;
        }).find("--kv-offload-memory needs prefix caching") != std::string::npos);
  CHECK(bad([](ServerOptions& o) { o.kv_offload_dir = "."; }).find("--kv-offload-dir needs --kv-offload-memory") !=
        std::string::npos);
  CHECK(bad([](ServerOptions& o) { o.log_format = "xml"; }).find("--log-format") != std::string::npos);
  CHECK(bad([](ServerOptions& o) { o.chat_template = "/nonexistent/t.jinja"; }).find("--chat-template") !=
        std::string::npos);
  CHECK(bad([](ServerOptions& o) { o.model = "/nonexistent/model"; }).find("--model") != std::string::npos);
}

TEST_CASE("metrics: Prometheus text with cumulative histogram buckets", "[metrics]") {
  ServerMetrics m("tiny");
  m.observe_ttft(0.003);
  m.observe_ttft(0.003);
  m.observe_ttft(50);
  m.count_finished("stop");
  m.count_http(200);
  m.count_http(429);
  ds::scheduler::EngineStats s;
  s.running = 2;
  s.waiting = 1;
  s.blocks_used = 5;
  s.prefix_cache_evictable = 2;  // held by the cache alone: free to vllm:kv_cache_usage_perc
  s.blocks_total = 10;
  s.slots_used = 2;
  s.slots_total = 4;
  s.prompt_tokens_total = 30;
  s.generated_tokens_total = 12;
  s.preemptions_total = 1;
  const std::string t = m.render(&s);
  CHECK(t.find("vllm:num_requests_running{model_name=\"tiny\"} 2\n") != std::string::npos);
  CHECK(t.find("vllm:num_requests_waiting{model_name=\"tiny\"} 1\n") != std::string::npos);
  CHECK(t.find("vllm:kv_cache_usage_perc{model_name=\"tiny\"} 0.3\n") != std::string::npos);
  CHECK(t.find("deltaserve:kv_cache_blocks_used{model_name=\"tiny\"} 5\n") != std::string::npos);
  CHECK(t.find("deltaserve:state_slots_total{model_name=\"tiny\"} 4\n") != std::string::npos);
  CHECK(t.find("vllm:prompt_tokens_total{model_name=\"tiny\"} 30\n") != std::string::npos);
  CHECK(t.find("vllm:generation_tokens_total{model_name=\"tiny\"} 12\n") != std::string::npos);
  CHECK(t.find("vllm:num_preemptions_total{model_name=\"tiny\"} 1\n") != std::string::npos);
  CHECK(t.find("vllm:request_success_total{model_name=\"tiny\",finished_reason=\"stop\"} 1\n") != std::string::npos);
  CHECK(t.find("deltaserve:http_requests_total{model_name=\"tiny\",code=\"429\"} 1\n") != std::string::npos);
  CHECK(t.find("vllm:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.001\"} 0\n") != std::string::npos);
  CHECK(t.find("vllm:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.005\"} 2\n") != std::string::npos);
  CHECK(t.find("vllm:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"40\"} 2\n") != std::string::npos);
  CHECK(t.find("vllm:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"80\"} 3\n") != std::string::npos);
  CHECK(t.find("vllm:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"+Inf\"} 3\n") != std::string::npos);
  CHECK(t.find("vllm:time_to_first_token_seconds_count{model_name=\"tiny\"} 3\n") != std::string::npos);
  for (const char* name : {"vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
                           "vllm:request_queue_time_seconds"})
    CHECK(t.find(std::string("# TYPE ") + name + " histogram\n") != std::string::npos);
}

TEST_CASE("--speculative-config: vLLM's JSON form, every key checked by name", "[server][speculative]") {
  using ds::server::parse_speculative_config;
  const auto c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3, "disable_by_batch_size": 32})");
  CHECK(c.method == "ngram");
  CHECK(c.num_speculative_tokens == 3);
  CHECK(c.disable_by_batch_size == 32);
  const auto n = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3})");
  CHECK(n.prompt_lookup_min == 1);
  CHECK(n.prompt_lookup_max == 3);
  CHECK(n.disable_by_batch_size == 0);
  auto refused = [&](const std::string& text, const std::string& says) {
    INFO(text);
    try {
      parse_speculative_config(text);
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::Contains(says));
    }
  };
  const auto m = parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 3})");
  CHECK(m.method == "mtp");
  CHECK(m.num_speculative_tokens == 3);
  CHECK(m.draft_vocab_size == 0);
  CHECK(parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 3, "draft_vocab_size": 32768})")
            .draft_vocab_size == 32768);
  refused(R"({"method": "ngram", "num_speculative_tokens": 3, "draft_vocab_size": 32768})", "mtp method only");
  // A token map: a JSON array of distinct ids in a file.
  {
    ds::test::TempDir dir;
    auto write = [&](const std::string& name, const std::string& text) {
      std::ofstream(dir.path() / name) << text;
      return (dir.path() / name).string();
    };
    const std::string good = write("map.json", "[10, 3, 7]");
    const auto t = parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 2, "draft_token_map": ")" +
                                            good + "\"}");
    CHECK(t.draft_tokens == std::vector<int32_t>{10, 3, 7});
    auto map_refused = [&](const std::string& file, const std::string& says, const std::string& extra = "") {
      refused(R"({"method": "mtp", "num_speculative_tokens": 2, "draft_token_map": ")" + file + "\"" + extra + "}",
              says);
    };
    map_refused((dir.path() / "missing.json").string(), "cannot be read");
    map_refused(write("obj.json", "{\"a\": 1}"), "non-empty JSON array");
    map_refused(write("empty.json", "[]"), "non-empty JSON array");
    map_refused(write("neg.json", "[1, -2]"), "entry 1 is not a token id");
    map_refused(write("str.json", "[1, \"x\"]"), "entry 1 is not a token id");
    map_refused(write("twice.json", "[4, 5, 4]"), "token id 4 is listed twice");
    map_refused(good, "exclude each other", ", \"draft_vocab_size\": 128");
    refused(R"({"method": "ngram", "num_speculative_tokens": 2, "draft_token_map": ")" + good + "\"}",
            "mtp method only");
  }
  refused(R"({"method": "mtp", "num_speculative_tokens": 3, "draft_vocab_size": -5})", "out of range");
  refused(R"({"method": "eagle", "num_speculative_tokens": 1})", "\"ngram\" or \"mtp\"");
  // The benchmarks' controlled-acceptance forms are serve_bench's, not serve's.
  refused(R"({"method": "simulate", "num_speculative_tokens": 2})", "\"ngram\" or \"mtp\"");
  refused(R"({"method": "mtp", "num_speculative_tokens": 1, "acceptance_rate": 0.8})", "unknown key \"acceptance_rate\"");
  refused(R"({"method": "ngram"})", "num_speculative_tokens is required");
  refused(R"({"method": "ngram", "num_speculative_tokens": 9})", "num_speculative_tokens must be in [1, 8]");
  refused(R"({"method": "ngram", "num_speculative_tokens": 2, "disable_by_batch_size": -1})", "out of range");
  refused(R"({"method": "ngram", "num_speculative_tokens": 2, "draft_model": "x"})", "unknown key \"draft_model\"");
  refused("[1]", "expected a JSON object");
}
