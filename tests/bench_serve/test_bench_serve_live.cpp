// bench_serve (the program) against a live `serve` on the bundled tiny model, CPU backend:
// for each dataset, the counts it reports (requests; tokens from the usage chunks, checked
// against the server's own /metrics counters) and that failures are reported as failures
// with the server's error text: a wrong model name (404), a full queue (429), no server.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include <httplib.h>

#include "programs/bench_serve/bench_json.h"
#include "programs/bench_serve/stream_reader.h"
#include "tests/server/serve_process.h"
#include "tests/test_paths.h"

using namespace ds::test;
using ds::bench::Json;

namespace {

const std::vector<std::string> kServe = {"--port", "0", "--kv-cache-memory", "64MiB"};

struct Server {
  explicit Server(const std::vector<std::string>& extra = {"--max-num-seqs", "8"}) : process(with(extra)) {
    if (!process.wait_log("ready:")) FAIL("serve did not start:\n" << process.log());
    port = process.port();
    REQUIRE(port > 0);
  }
  static std::vector<std::string> with(const std::vector<std::string>& extra) {
    std::vector<std::string> a = kServe;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  // A counter of /metrics (summed over its label sets).
  double counter(const std::string& name) const {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get("/metrics");
    REQUIRE(r);
    double sum = 0;
    std::istringstream in(r->body);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(name + "{", 0) == 0 || line.rfind(name + " ", 0) == 0) sum += std::stod(line.substr(line.rfind(' ')));
    return sum;
  }
  ServeProcess process;
  int port = -1;
};

struct BenchRun {
  int code = -1;
  std::string output;
  Json result;
};

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs build/bench_serve with `args` (plus --result-json and --no-progress).
BenchRun bench(const std::string& url, const std::vector<std::string>& args) {
  static int n = 0;
  std::string json = temp_path("ds_bench_live_");
  json += std::to_string(::getpid()) + "_" + std::to_string(n++) + ".json";
  std::string cmd = quoted(DS_BENCH_SERVE_BIN) + " --base-url " + quoted(url) + " --result-json " + json + " --no-progress";
  for (const auto& a : args) {
    cmd += ' ';
    cmd += quoted(a);
  }
  cmd += " 2>&1";
  BenchRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  for (size_t k; (k = std::fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, k);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream f(json);
  if (f) r.result = Json::parse(f, nullptr, false);
  std::remove(json.c_str());
  UNSCOPED_INFO("bench_serve output:\n" << r.output);
  return r;
}

int64_t sum(const Json& a) {
  int64_t s = 0;
  for (const auto& x : a) s += x.get<int64_t>();
  return s;
}

// What every successful run must show: counts that add up and the server's own counters
// moved by exactly the tokens bench_serve reports from usage.
void check_counts(const BenchRun& r, const Server& s, double prompt0, double gen0, int requests) {
  REQUIRE(r.code == 0);
  REQUIRE(r.result.is_object());
  CHECK(r.result["completed"] == requests);
  CHECK(r.result["failed"] == 0);
  CHECK(r.result["input_lens"].size() == static_cast<size_t>(requests));
  CHECK(sum(r.result["input_lens"]) == r.result["total_input_tokens"].get<int64_t>());
  CHECK(sum(r.result["output_lens"]) == r.result["total_output_tokens"].get<int64_t>());
  CHECK(s.counter("vllm:prompt_tokens_total") - prompt0 == r.result["total_input_tokens"].get<double>());
  CHECK(s.counter("vllm:generation_tokens_total") - gen0 == r.result["total_output_tokens"].get<double>());
  CHECK(r.result["mean_ttft_ms"].get<double>() > 0);
  CHECK(r.result["mean_e2el_ms"].get<double>() >= r.result["mean_ttft_ms"].get<double>());
  CHECK(r.result["p99_itl_ms"].get<double>() > 0);
  CHECK(r.result["output_throughput"].get<double>() > 0);
  CHECK(r.output.find("Successful requests:") != std::string::npos);
}

}  // namespace

TEST_CASE("random: token-id completions and word chat, counts from usage", "[random]") {
  Server s;
  double p0 = s.counter("vllm:prompt_tokens_total"), g0 = s.counter("vllm:generation_tokens_total");
  BenchRun r = bench(s.url(), {"--num-prompts", "6", "--random-input-len", "24", "--random-output-len", "6",
                               "--random-vocab-size", "1000", "--ignore-eos", "--max-concurrency", "3", "--warmup",
                               "1", "--temperature", "0"});
  // The warm-up request is not counted by bench_serve, but the server saw it.
  p0 += 24;
  g0 += 6;
  check_counts(r, s, p0, g0, 6);
  CHECK(r.result["total_input_tokens"] == 6 * 24);
  CHECK(r.result["total_output_tokens"] == 6 * 6);
  CHECK(r.result["model_id"] == "tiny-qwen35");  // the first of /v1/models
  CHECK(r.result["max_concurrency"] == 3);

  p0 = s.counter("vllm:prompt_tokens_total"), g0 = s.counter("vllm:generation_tokens_total");
  r = bench(s.url(), {"--endpoint", "/v1/chat/completions", "--num-prompts", "4", "--random-input-len", "10",
                      "--random-output-len", "5", "--ignore-eos", "--request-rate", "50"});
  check_counts(r, s, p0, g0, 4);
  CHECK(r.result["total_output_tokens"] == 4 * 5);
  CHECK(r.result["backend"] == "openai-chat");
  // Ten words plus the chat template's tokens: more than ten tokens each.
  for (const auto& n : r.result["input_lens"]) CHECK(n.get<int>() > 10);
}

TEST_CASE("shared-prefix: groups of a common prefix plus unique tokens", "[shared-prefix]") {
  Server s;
  const double p0 = s.counter("vllm:prompt_tokens_total"), g0 = s.counter("vllm:generation_tokens_total");
  const BenchRun r = bench(s.url(), {"--dataset", "shared-prefix", "--num-prompts", "6", "--shared-prefix-groups", "2",
                                     "--shared-prefix-len", "16", "--shared-suffix-len", "4", "--random-output-len",
                                     "3", "--random-vocab-size", "1000", "--ignore-eos"});
  check_counts(r, s, p0, g0, 6);
  CHECK(r.result["total_input_tokens"] == 6 * 20);
  CHECK(r.result["total_output_tokens"] == 6 * 3);
}

TEST_CASE("multi-turn: conversations resend their history; TTFT per turn", "[multi-turn]") {
  Server s;
  const double p0 = s.counter("vllm:prompt_tokens_total"), g0 = s.counter("vllm:generation_tokens_total");
  const BenchRun r = bench(s.url(), {"--dataset", "multi-turn", "--endpoint", "/v1/chat/completions", "--num-prompts",
                                     "2", "--turns", "3", "--system-prompt-len", "6", "--random-input-len", "8",
                                     "--random-output-len", "4", "--ignore-eos"});
  check_counts(r, s, p0, g0, 6);
  CHECK(r.result["num_prompts"] == 2);
  CHECK(r.result["total_output_tokens"] == 6 * 4);
  const Json& turns = r.result["ttft_by_turn"];
  REQUIRE(turns.size() == 3);
  for (int t = 0; t < 3; ++t) {
    CHECK(turns[t]["turn"] == t + 1);
    CHECK(turns[t]["completed"] == 2);
    CHECK(turns[t]["mean_ttft_ms"].get<double>() > 0);
  }
  // Each turn carries the previous one's prompt, its 4-token reply and a new user message.
  for (int t = 1; t < 3; ++t)
    CHECK(turns[t]["mean_input_tokens"].get<double>() > turns[t - 1]["mean_input_tokens"].get<double>() + 4 + 8);
  CHECK(r.output.find("TTFT by turn") != std::string::npos);
  // Per request, in workload order (conversation by conversation): its turn and when it was
  // sent; a turn goes out after the previous one's reply has ended.
  CHECK(r.result["turns"] == Json({0, 1, 2, 0, 1, 2}));
  const Json& start = r.result["start_times"];
  REQUIRE(start.size() == 6);
  for (size_t i : {1, 2, 4, 5})
    CHECK(start[i].get<double>() >= start[i - 1].get<double>() + r.result["ttfts"][i - 1].get<double>());
}

TEST_CASE("file: replayed JSONL requests, prompts and messages", "[file]") {
  Server s;
  const std::string path = temp_path("ds_bench_live_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream f(path);
    f << R"({"prompt": "Once upon a time", "max_tokens": 3})" << "\n"
      << R"({"prompt": [11, 12, 13, 14, 15, 16, 17, 18, 19, 20], "max_tokens": 5})" << "\n";
  }
  double p0 = s.counter("vllm:prompt_tokens_total"), g0 = s.counter("vllm:generation_tokens_total");
  BenchRun r = bench(s.url(), {"--dataset", "file", "--dataset-path", path, "--ignore-eos"});
  check_counts(r, s, p0, g0, 2);
  CHECK(r.result["output_lens"] == Json({3, 5}));
  CHECK(r.result["input_lens"][1] == 10);

  {
    std::ofstream f(path);
    f << R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 2})"
      << "\n"
      << R"({"prompt": "Hello", "max_completion_tokens": 4})" << "\n";
  }
  p0 = s.counter("vllm:prompt_tokens_total"), g0 = s.counter("vllm:generation_tokens_total");
  r = bench(s.url(), {"--dataset", "file", "--dataset-path", path, "--endpoint", "/v1/chat/completions",
                      "--ignore-eos", "--num-prompts", "3"});
  check_counts(r, s, p0, g0, 3);
  CHECK(r.result["output_lens"] == Json({2, 4, 2}));
  std::remove(path.c_str());
}

TEST_CASE("errors: wrong model (404), full queue (429), no server: failures with the error text", "[errors]") {
  {
    Server s;
    // What the server itself answers, so the check does not depend on its wording.
    httplib::Client c("127.0.0.1", s.port);
    auto direct = c.Post("/v1/completions", R"({"model": "no-such-model", "prompt": "x", "max_tokens": 1, "stream": true})",
                         "application/json");
    REQUIRE(direct);
    REQUIRE(direct->status == 404);
    const std::string expected = "HTTP 404: " + ds::bench::error_message(direct->body);

    const BenchRun r = bench(s.url(), {"--model", "no-such-model", "--num-prompts", "3", "--random-input-len", "4",
                                       "--random-output-len", "2"});
    CHECK(r.code == 2);
    REQUIRE(r.result.is_object());
    CHECK(r.result["completed"] == 0);
    CHECK(r.result["failed"] == 3);
    REQUIRE(r.result["error_counts"].size() == 1);
    CHECK(r.result["error_counts"][0]["error"] == expected);
    CHECK(r.result["error_counts"][0]["count"] == 3);
    CHECK(r.result["errors"] == Json({expected, expected, expected}));
    CHECK(r.output.find("first error: " + expected) != std::string::npos);
    CHECK(r.output.find("3 x " + expected) != std::string::npos);
  }
  {
    // One running, one waiting: a burst of ten fills the queue at once.
    Server s({"--max-num-seqs", "1", "--max-queue", "1"});
    const BenchRun r = bench(s.url(), {"--num-prompts", "10", "--random-input-len", "8", "--random-output-len", "24",
                                       "--random-vocab-size", "1000", "--ignore-eos"});
    CHECK(r.code == 2);
    REQUIRE(r.result.is_object());
    const int completed = r.result["completed"], failed = r.result["failed"];
    CHECK(completed >= 1);
    CHECK(failed >= 1);
    CHECK(completed + failed == 10);
    REQUIRE(r.result["error_counts"].size() == 1);
    const std::string e = r.result["error_counts"][0]["error"];
    CHECK(e.rfind("HTTP 429: ", 0) == 0);
    CHECK(e.size() > std::string("HTTP 429: ").size());
    CHECK(r.result["error_counts"][0]["count"] == failed);
    // Only the completed requests count tokens.
    CHECK(r.result["total_output_tokens"] == completed * 24);
    CHECK(r.output.find("first error: HTTP 429") != std::string::npos);
  }
  {
    // Nothing listens there: every request fails on the connection, none is dropped.
    int port = 0;
    {
      Server gone;
      port = gone.port;
    }
    const BenchRun r = bench("http://127.0.0.1:" + std::to_string(port), {"--model", "m", "--num-prompts", "2"});
    CHECK(r.code == 2);
    REQUIRE(r.result.is_object());
    CHECK(r.result["failed"] == 2);
    CHECK(r.result["error_counts"][0]["error"] == "connection: could not connect to http://127.0.0.1:" + std::to_string(port));
  }
}

TEST_CASE("images: random JPEGs per request on the vision-language fixture", "[images]") {
  Server s({"--model", ds::test::data_path("tiny-qwen35-vl"), "--max-num-seqs", "4", "--limit-mm-per-prompt",
            R"({"image": 2})"});
  const double p0 = s.counter("vllm:prompt_tokens_total"), g0 = s.counter("vllm:generation_tokens_total");
  const BenchRun r = bench(s.url(), {"--endpoint", "/v1/chat/completions", "--num-prompts", "3", "--random-input-len",
                                     "6", "--random-output-len", "4", "--ignore-eos", "--image-size", "64x40",
                                     "--images-per-request", "2", "--max-concurrency", "2"});
  check_counts(r, s, p0, g0, 3);
  CHECK(r.result["dataset"] == "random+2x64x40");
  // Each image adds at least its merged tokens and the vision start/end tokens.
  for (const auto& n : r.result["input_lens"]) CHECK(n.get<int>() > 6 + 2 * 4);
  // Every image is new: the encoder ran for each of them.
  CHECK(s.counter("deltaserve:images_encoded_total") == 6);
}
