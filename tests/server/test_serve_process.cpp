// The `serve` program itself: --help, flags refused at start, the start-up log, JSON logs,
// signals (graceful SIGTERM/SIGINT exit 0, a second signal cancels), speculative decoding
// with the checkpoint's MTP module against plain serving, and the vision tower (its encoder
// budget, --language-model-only); and programs/serve_bench, serve with the benchmarks'
// contiguous baseline and simulated verdict injected at its composition root.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <httplib.h>

#include "server/json.h"
#include "tests/model/mtp_checkpoint.h"
#include "tests/server/serve_process.h"
#include "tests/server/server_fixture.h"
#include "tests/test_paths.h"

using namespace ds::test;
using ds::server::Json;

namespace {

const std::vector<std::string> kSmall = {"--port", "0", "--kv-cache-memory", "64MiB", "--max-num-seqs", "8"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

}  // namespace

TEST_CASE("serve --help documents every flag", "[process]") {
  ServeProcess p({"--help"});
  REQUIRE(p.wait_exit() == 0);
  const std::string help = p.log();
  for (const char* flag :
       {"--model", "-m", "--version", "--host", "--port", "--served-model-name", "--api-key", "DELTASERVE_API_KEY",
        "--paged-attention", "--max-ctx", "--kv-cache-dtype", "--mamba-ssm-cache-dtype", "--block-size", "--gpu-memory-utilization",
        "--kv-cache-memory", "--kv-offload-memory", "--kv-offload-dir", "--max-num-seqs", "--max-num-batched-tokens", "--max-queue", "--quantization", "--fp8-weights", "--backend",
        "--enforce-eager",
        "--chat-template", "--log-level", "--log-format", "--max-connections", "--max-body-size", "--max-body-memory",
        "--request-head-timeout", "--request-body-timeout", "--min-body-rate", "--keep-alive-timeout", "--write-timeout",
        "--grammar-compile-concurrency", "--grammar-compile-queue", "--grammar-compile-timeout", "--grammar-max-states",
        "--grammar-max-memory", "--grammar-cache-memory"})
    CHECK(help.find(flag) != std::string::npos);
  // No internal default values of negated flags in the text.
  CHECK(help.find("{false}") == std::string::npos);
  CHECK(help.find("{true}") == std::string::npos);
}

TEST_CASE("serve --version names the version and the commit it was built from", "[process]") {
  ServeProcess p({"--version"});
  REQUIRE(p.wait_exit() == 0);
  INFO(p.log());
  CHECK(p.log().rfind("deltaserve 0.", 0) == 0);
  CHECK(p.log().find("(commit ") != std::string::npos);
}

TEST_CASE("the model directory is taken as `serve DIR` (vllm serve) and `-m DIR` (llama-server)", "[process]") {
  for (const std::vector<std::string>& model : {std::vector<std::string>{data_path("tiny-qwen35")},
                                                std::vector<std::string>{"-m", data_path("tiny-qwen35")}}) {
    ServeProcess p(with(model, kSmall));
    REQUIRE(p.wait_log("ready:"));
    INFO(p.log());
    CHECK(p.log().find("serving model 'tiny-qwen35'") != std::string::npos);
    p.signal(SIGTERM);
    CHECK(p.wait_exit() == 0);
  }
}

TEST_CASE("serve with the default cache starts at once and stays small when idle", "[process]") {
  ServeProcess p({"--port", "0"});
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(p.wait_log("ready:"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The 1 GiB default is mapped lazily: neither touched at start-up nor resident when idle.
  std::ifstream status("/proc/" + std::to_string(p.pid()) + "/status");
  int64_t rss_kib = -1;
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) rss_kib = std::stoll(line.substr(6));
  INFO("start-up " << seconds << " s, idle RSS " << rss_kib / 1024 << " MiB");
  CHECK(rss_kib > 0);
  CHECK(rss_kib < 256 * 1024);
  CHECK(seconds < 20.0);
  // The checkpoint size counts its weight file only, not the reference fixtures beside it.
  char size[32];
  std::snprintf(size, sizeof size, "checkpoint %.1f MiB",
                static_cast<double>(std::filesystem::file_size(data_path("tiny-qwen35") + "/model.safetensors")) /
                    (1024.0 * 1024.0));
  CHECK(p.log().find(size) != std::string::npos);
  p.signal(SIGTERM);
  CHECK(p.wait_exit() == 0);
}

TEST_CASE("serve --mamba-ssm-cache-dtype bfloat16 keeps the recurrent state in bf16 slots of half the bytes", "[process]") {
  // The tiny model's slot: 6 DeltaNet layers of conv 1024 channels x 3 taps (f32) and recurrent
  // 4 value heads x 128 x 128.
  const auto slot_mib = [](int recurrent_bytes) {
    char s[64];
    std::snprintf(s, sizeof s, "%.2f MiB per sequence",
                  (4.0 * 6 * 1024 * 3 + recurrent_bytes * 6.0 * 4 * 128 * 128) / (1 << 20));
    return std::string(s);
  };
  for (const auto& [flag, type, bytes] : {std::tuple{"auto", "recurrent state f32", 4},
                                          std::tuple{"bfloat16", "recurrent state bf16", 2}}) {
    ServeProcess p({"--port", "0", "--mamba-ssm-cache-dtype", flag});
    REQUIRE(p.wait_log("ready:"));
    INFO(p.log());
    CHECK(p.log().find(type) != std::string::npos);
    CHECK(p.log().find(slot_mib(bytes)) != std::string::npos);
    p.signal(SIGTERM);
    CHECK(p.wait_exit() == 0);
  }
}

TEST_CASE("serve refuses flags that cannot work, before serving, with a clear message", "[process]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
    std::string alternative = {};  // a second acceptable message, where the build decides which
    bool before_listening = false;  // refused before the port is bound
  };
  const std::vector<Case> cases = {
      {{"--gpu-memory-utilization", "0.9"}, "--gpu-memory-utilization sizes device memory"},
      {{"--backend", "cuda", "--gpu-memory-utilization", "0.9", "--kv-cache-memory", "1G"}, "not both"},
      // A build without CUDA has no cuda backend; a CUDA build on a machine without a GPU finds none.
      {{"--backend", "cuda"}, "-DDELTASERVE_CUDA=ON", "no CUDA device available"},
      {{"--backend", "hip"}, "no hip backend", {}, true},
      {{"--backend", "tpu"}, "--backend must be"},
      {{"--kv-cache-dtype", "bf16"}, "stores K/V as f32"},
      {{"--max-ctx", "100000"}, "exceeds the model's 4096 positions"},
      {{"--max-ctx", "4096", "--kv-cache-memory", "8MiB"}, "more than the K/V cache holds"},
      {{"--kv-cache-memory", "1KiB"}, "--kv-cache-memory: a cache budget of 1024 bytes cannot hold one DeltaNet state slot"},
      {{"--kv-cache-memory", "lots"}, "--kv-cache-memory: 'lots' is not a size"},
      {{"--kv-cache-dtype", "int3"}, "--kv-cache-dtype: unknown element type 'int3'"},
      {{"--mamba-ssm-cache-dtype", "float16"}, "--mamba-ssm-cache-dtype must be auto, float32 or bfloat16"},
      // The benchmarks' forms are serve_bench's.
      {{"--speculative-config", R"({"method": "simulate", "num_speculative_tokens": 2})"}, "\"ngram\" or \"mtp\""},
      {{"--model", "/nonexistent/dir"}, "--model: no such directory"},
      {{"/nonexistent/dir"}, "--model: no such directory"},
      {{"-m", "tests/data/tiny-qwen35", "tests/data/tiny-qwen35"}, "was not expected"},
      {{"--chat-template", "/nonexistent.jinja"}, "--chat-template: no such file"},
      {{"--log-format", "xml"}, "--log-format must be text or json"},
      {{"--log-level", "loud"}, "--log-level must be"},
      {{"--block-size", "0"}, "--block-size"},
      {{"--max-num-seqs", "0"}, "--max-num-seqs"},
      {{"--quantization", "int4"}, "--quantization must be none, fp8, gptq or awq"},
      {{"--fp8-weights", "fp16"}, "--fp8-weights must be bf16 or resident"},
      {{"--max-body-size", "64MiB", "--max-body-memory", "32MiB"}, "--max-body-memory must be at least --max-body-size"},
      {{"--max-body-size", "lots"}, "--max-body-size:"},
      {{"--max-connections", "0"}, "--max-connections must be"},
      {{"--grammar-compile-timeout", "0"}, "--grammar-compile-timeout must be"},
      {{"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 2})"},
       "speculative method \"mtp\" needs the checkpoint's MTP module"},
  };
  for (const auto& c : cases) {
    INFO(c.message);
    ServeProcess p(with({"--port", "0"}, c.args));
    const auto code = p.wait_exit();
    REQUIRE(code.has_value());
    CHECK(*code != 0);
    const bool said = p.log().find(c.message) != std::string::npos ||
                      (!c.alternative.empty() && p.log().find(c.alternative) != std::string::npos);
    CHECK(said);
    // A build without the backend says so before it listens (a CUDA build without a GPU finds
    // out only when it loads).
    if (c.before_listening || p.log().find("-DDELTASERVE_CUDA=ON") != std::string::npos)
      CHECK(p.log().find("listening on") == std::string::npos);
    CHECK(p.log().find("ready:") == std::string::npos);
    CHECK(p.log().find("size_pools") == std::string::npos);  // the flag, never an internal function
  }
}

TEST_CASE("serve starts on the bundled model, logs its capacity, and exits 0 on SIGTERM", "[process]") {
  // Started from another directory: the bundled model is found next to the executable.
  ServeProcess p(kSmall, std::filesystem::temp_directory_path().string());
  REQUIRE(p.wait_log("ready:"));
  const int port = p.port();
  REQUIRE(port > 0);
  const std::string log = p.log();
  for (const char* line : {"weights: 8 layers", "K/V cache:", "tokens", "DeltaNet state slots: 8",
                           "max concurrency at max-ctx", "paged"})
    CHECK(log.find(line) != std::string::npos);
  httplib::Client c("127.0.0.1", port);
  auto h = c.Get("/health");
  REQUIRE(h);
  CHECK(h->status == 200);
  auto r = c.Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 3})", "application/json");
  REQUIRE(r);
  CHECK(r->status == 200);
  p.signal(SIGTERM);
  CHECK(p.wait_exit(std::chrono::seconds(30)) == 0);
  CHECK(p.log().find("stopped") != std::string::npos);
}

TEST_CASE("serve --kv-offload-memory logs the host tier it made and serves with it", "[process]") {
  std::vector<std::string> args = kSmall;
  args.insert(args.end(), {"--kv-offload-memory", "64MiB"});
  ServeProcess p(args);
  REQUIRE(p.wait_log("ready:"));
  const std::string log = p.log();
  CHECK(log.find("host tier: ") != std::string::npos);
  CHECK(log.find("state snapshots") != std::string::npos);
  httplib::Client c("127.0.0.1", p.port());
  auto r = c.Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 3})", "application/json");
  REQUIRE(r);
  CHECK(r->status == 200);
  auto m = c.Get("/metrics");
  REQUIRE(m);
  CHECK(m->body.find("deltaserve:prefix_cache_host_block_capacity{") != std::string::npos);
  p.signal(SIGTERM);
  CHECK(p.wait_exit(std::chrono::seconds(30)) == 0);
}

TEST_CASE("serve --kv-offload-dir: a restarted server resumes a conversation from the files", "[process]") {
  const std::filesystem::path dir = temp_path("ds_serve_disk_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto args = with(kSmall, {"--kv-offload-memory", "64MiB", "--kv-offload-dir", dir.string()});
  Json messages = Json::array({Json{{"role", "user"}, {"content", "Tell me about a lighthouse keeper and the sea."}}});
  auto chat = [&](int port) {
    httplib::Client c("127.0.0.1", port);
    const Json body{{"messages", messages},
                    {"max_tokens", 4},
                    {"temperature", 0},
                    {"chat_template_kwargs", {{"enable_thinking", false}}}};
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    return Json::parse(r->body);
  };
  int64_t first_prompt = 0;
  {
    ServeProcess p(args);
    REQUIRE(p.wait_log("ready:"));
    const Json a = chat(p.port());
    first_prompt = a["usage"]["prompt_tokens"].get<int64_t>();
    messages.push_back(Json{{"role", "assistant"}, {"content", a["choices"][0]["message"]["content"]}});
    p.signal(SIGTERM);
    REQUIRE(p.wait_exit(std::chrono::seconds(30)) == 0);  // the cache goes to the files on the way out
  }
  REQUIRE(!std::filesystem::is_empty(dir));
  {
    ServeProcess p(args);
    REQUIRE(p.wait_log("ready:"));
    CHECK(p.log().find("disk tier: ") != std::string::npos);
    CHECK(p.log().find(" read 0 entries") == std::string::npos);
    messages.push_back(Json{{"role", "user"}, {"content", "And in winter?"}});
    const Json b = chat(p.port());
    CHECK(b["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>() >= first_prompt - 15);
    p.signal(SIGTERM);
    CHECK(p.wait_exit(std::chrono::seconds(30)) == 0);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("serve --kv-offload-memory: a conversation evicted from the device cache comes back from the host tier",
          "[process]") {
  // A device cache of ~2,400 tokens and one state snapshot; other conversations of ~3 x 900
  // tokens between the two turns evict the first turn's blocks and snapshot. With the host tier
  // the second turn starts from the first turn's prompt (cached_tokens); without it, it does not.
  auto run = [](bool host_tier) {
    std::vector<std::string> args = {"--port", "0", "--kv-cache-memory", "24MiB", "--max-num-seqs", "2"};
    if (host_tier) args.insert(args.end(), {"--kv-offload-memory", "64MiB"});
    ServeProcess p(args);
    REQUIRE(p.wait_log("ready:"));
    httplib::Client c("127.0.0.1", p.port());
    c.set_read_timeout(120);
    auto chat = [&](const Json& messages, int max_tokens) {
      const Json body{{"messages", messages},
                      {"max_tokens", max_tokens},
                      {"temperature", 0},
                      {"chat_template_kwargs", {{"enable_thinking", false}}}};
      auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
      REQUIRE(r);
      INFO(r->body);
      REQUIRE(r->status == 200);
      return Json::parse(r->body);
    };
    auto metric = [&](const std::string& name) {
      auto m = c.Get("/metrics");
      REQUIRE(m);
      const size_t at = m->body.find("\n" + name + "{");
      return at == std::string::npos ? -1.0 : std::stod(m->body.substr(m->body.find('}', at) + 2));
    };
    Json a = Json::array({Json{{"role", "system"}, {"content", "You keep the lighthouse log, one line a day."}},
                          Json{{"role", "user"}, {"content", "Write today's entry: fog at dawn, a trawler at noon, "
                                                             "gulls on the rail, the lamp trimmed at dusk."}}});
    const Json first = chat(a, 4);
    const int64_t first_prompt = first["usage"]["prompt_tokens"].get<int64_t>();
    int64_t filler_tokens = 0;
    for (int k = 0; k < 3; ++k) {
      std::string text;
      for (int w = 0; w < 180; ++w) text += "ledger" + std::to_string(k) + "-" + std::to_string(w * 7919 % 1000) + " ";
      const Json f = chat(Json::array({Json{{"role", "user"}, {"content", text}}}), 1);
      filler_tokens += f["usage"]["prompt_tokens"].get<int64_t>();
    }
    INFO("first turn " << first_prompt << " prompt tokens, the others " << filler_tokens);
    REQUIRE(filler_tokens > 2464);
    a.push_back(Json{{"role", "assistant"}, {"content", first["choices"][0]["message"]["content"]}});
    a.push_back(Json{{"role", "user"}, {"content", "And tomorrow's?"}});
    const double host_hits = metric("deltaserve:prefix_cache_host_hits_total");
    const Json second = chat(a, 4);
    const int64_t cached = second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
    const double host_hits_after = metric("deltaserve:prefix_cache_host_hits_total");
    p.signal(SIGTERM);
    CHECK(p.wait_exit(std::chrono::seconds(30)) == 0);
    return std::tuple{first_prompt, cached, host_hits_after - host_hits};
  };
  const auto [prompt_with, cached_with, host_hits] = run(true);
  const auto [prompt_without, cached_without, unused] = run(false);
  INFO("cached tokens of the second turn: " << cached_with << " with the host tier, " << cached_without << " without");
  CHECK(prompt_with == prompt_without);
  // The first turn's prompt up to its generation prompt's empty think block (6 tokens the next
  // turn does not render), to a block boundary; from the host tier.
  CHECK(cached_with >= prompt_with - 6 - 15);
  CHECK(host_hits >= 1);
  CHECK(cached_without < prompt_with - 6 - 15);  // the device alone had lost it
}

TEST_CASE("serve --quantization fp8 quantises the bundled model at load and serves it", "[process]") {
  ServeProcess p(with(kSmall, {"--quantization", "fp8"}));
  REQUIRE(p.wait_log("ready:"));
  CHECK(p.log().find("--quantization fp8: linear weights quantised") != std::string::npos);
  httplib::Client c("127.0.0.1", p.port());
  auto r = c.Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 3})", "application/json");
  REQUIRE(r);
  CHECK(r->status == 200);
  p.signal(SIGTERM);
  CHECK(p.wait_exit(std::chrono::seconds(30)) == 0);
}

TEST_CASE("SIGINT lets an in-flight stream finish; a second signal cancels it; exit 0", "[process]") {
  for (const bool twice : {false, true}) {
    INFO("twice = " << twice);
    ServeProcess p(kSmall);
    REQUIRE(p.wait_log("ready:"));
    const int port = p.port();
    std::string body;
    std::thread client([&] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(120, 0);
      const std::string req = twice ? R"({"prompt": "Hi", "max_tokens": 3000, "ignore_eos": true, "stream": true})"
                                    : R"({"prompt": "Hi", "max_tokens": 60, "ignore_eos": true, "stream": true})";
      auto r = c.Post("/v1/completions", req, "application/json");
      if (r) body = r->body;
    });
    // Wait until the request is generating, then signal.
    httplib::Client m("127.0.0.1", port);
    for (int i = 0; i < 5000; ++i) {
      auto x = m.Get("/metrics");
      if (x && x->body.find("vllm:num_requests_running{model_name=\"tiny-qwen35\"} 1") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    p.signal(SIGINT);
    if (twice) {
      REQUIRE(p.wait_log("shutting down"));
      p.signal(SIGINT);
    }
    CHECK(p.wait_exit(std::chrono::seconds(60)) == 0);
    client.join();
    CHECK(body.find("data: [DONE]") != std::string::npos);
    CHECK(body.find(twice ? "\"finish_reason\":\"abort\"" : "\"finish_reason\":\"length\"") != std::string::npos);
  }
}

TEST_CASE("--log-format json writes one JSON object per line", "[process]") {
  ServeProcess p(with(kSmall, {"--log-format", "json", "--paged-attention", "--max-ctx", "256", "--served-model-name", "tiny",
                               "--api-key", "k1"}));
  REQUIRE(p.wait_log("ready:"));
  const int port = p.port();
  httplib::Client c("127.0.0.1", port);
  c.set_bearer_token_auth("k1");
  auto r = c.Post("/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})",
                  "application/json");
  REQUIRE(r);
  CHECK(r->status == 200);
  p.signal(SIGTERM);
  REQUIRE(p.wait_exit() == 0);
  std::istringstream lines(p.log());
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const Json j = Json::parse(line, nullptr, false);
    INFO(line);
    REQUIRE(j.is_object());
    CHECK(j.contains("time"));
    CHECK(j.contains("level"));
    CHECK(j.contains("message"));
    ++n;
  }
  CHECK(n >= 5);
}

#ifdef DS_SERVE_BENCH_BIN
TEST_CASE("serve_bench: the contiguous baseline and a simulated verdict from its own composition root", "[process]") {
  SECTION("the contiguous baseline reserves max-ctx per sequence") {
    ServeProcess p(with(kSmall, {"--contiguous-baseline", "--max-ctx", "256"}), {}, DS_SERVE_BENCH_BIN);
    REQUIRE(p.wait_log("ready:"));
    httplib::Client c("127.0.0.1", p.port());
    auto r = c.Post("/v1/completions", R"({"prompt": "Hello", "max_tokens": 3})", "application/json");
    REQUIRE(r);
    CHECK(r->status == 200);
    p.signal(SIGTERM);
    REQUIRE(p.wait_exit() == 0);
    const std::string log = p.log();
    INFO(log);
    CHECK(log.find("contiguous baseline: max-ctx reserved per sequence") != std::string::npos);
    CHECK(log.find("prefix caching: off (the contiguous baseline keeps no blocks)") != std::string::npos);
    // 64 MiB holds 8 state slots and plenty of 256-token sequences: 8 run at once.
    CHECK(log.find("DeltaNet state slots: 8") != std::string::npos);
  }
  SECTION("a simulated verdict keeps drafts, and says the replies are not the model's") {
    ServeProcess p(with(kSmall, {"--speculative-config",
                                 R"({"method": "simulate", "num_speculative_tokens": 2, "acceptance_rate": 1, "seed": 1})"}),
                   {}, DS_SERVE_BENCH_BIN);
    REQUIRE(p.wait_log("ready:"));
    httplib::Client c("127.0.0.1", p.port());
    auto r = c.Post("/v1/completions", R"({"prompt": "Hello there", "max_tokens": 12, "ignore_eos": true})",
                    "application/json");
    REQUIRE(r);
    CHECK(r->status == 200);
    auto m = c.Get("/metrics");
    REQUIRE(m);
    // Acceptance 1: every drafted token was kept.
    const std::regex drafted(R"(vllm:spec_decode_num_draft_tokens_total\{[^}]*\} (\d+))");
    const std::regex accepted(R"(vllm:spec_decode_num_accepted_tokens_total\{[^}]*\} (\d+))");
    std::smatch d, a;
    REQUIRE(std::regex_search(m->body, d, drafted));
    REQUIRE(std::regex_search(m->body, a, accepted));
    CHECK(std::stoi(d[1]) > 0);
    CHECK(d[1] == a[1]);
    p.signal(SIGTERM);
    REQUIRE(p.wait_exit() == 0);
    CHECK(p.log().find("NOT the model's output") != std::string::npos);
  }
}
#endif

TEST_CASE("SIGTERM exits promptly while clients trickle a request or sit idle", "[process]") {
  ServeProcess p(kSmall);
  REQUIRE(p.wait_log("ready:"));
  const int port = p.port();
  // One client trickles a head byte by byte, another holds an idle kept-alive connection, a
  // third has sent half a body.
  RawClient trickle(port), idle(port), half(port);
  REQUIRE(trickle.send_bytes("GET /health HTTP/1.1\r\nX-Slow: ", 1000));
  REQUIRE(idle.send_bytes("GET /health HTTP/1.1\r\n\r\n", 1000));
  CHECK(idle.read_until("\r\n\r\n", std::chrono::seconds(5)).find(" 200 ") != std::string::npos);
  REQUIRE(half.send_bytes("POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"prompt\"", 1000));
  std::atomic<bool> stop{false};
  std::thread dripper([&] {
    while (!stop.load()) {
      trickle.send_bytes("a", 100);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  p.signal(SIGTERM);
  const auto code = p.wait_exit(std::chrono::seconds(20));
  stop = true;
  dripper.join();
  CHECK(code == 0);
  // Nothing is in flight, so nothing drains: the exit does not wait for the slow clients.
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("an impossible default in generation_config.json stops start-up, naming the key", "[process]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("ds_bad_gencfg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"})
    std::filesystem::copy_file(data_path("tiny-qwen35") + "/" + f, dir / f, std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "generation_config.json") << R"({"top_p": 7, "temperature": 0.6})";
  ServeProcess p(with(kSmall, {"--model", dir.string()}));
  CHECK(p.wait_exit() == 1);
  CHECK(p.log().find("generation_config.json: 'top_p' must be in (0, 1]") != std::string::npos);
  CHECK(p.log().find("ready:") == std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a port in use is a clear start-up error", "[process]") {
  ServeProcess a(kSmall);
  const int port = a.port();
  REQUIRE(port > 0);
  ServeProcess b({"--port", std::to_string(port)});
  CHECK(b.wait_exit() == 1);
  CHECK(b.log().find("cannot listen on 127.0.0.1:" + std::to_string(port)) != std::string::npos);
  a.signal(SIGTERM);
  CHECK(a.wait_exit() == 0);
}

TEST_CASE("on a terminal, a progress bar follows the weights being read", "[process]") {
  int master = -1, slave = -1;
  REQUIRE(::openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
  std::vector<std::string> args_s = {DS_SERVE_BIN, "--port", "0", "--kv-cache-memory", "64MiB", "--max-num-seqs", "4"};
  std::vector<char*> argv;
  for (auto& a : args_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, slave, 1);
  posix_spawn_file_actions_adddup2(&fa, slave, 2);
  posix_spawn_file_actions_addclose(&fa, master);
  pid_t pid = -1;
  REQUIRE(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(slave);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (out.find("ready:") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  // Keep draining the terminal so the child never blocks on a full pty while it exits.
  for (int i = 0; i < 3000 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 10) > 0) {
      char buf[4096];
      if (::read(master, buf, sizeof buf) <= 0) break;
    }
  }
  ::close(master);
  CHECK(out.find("loading weights [") != std::string::npos);
  CHECK(out.find("100%") != std::string::npos);
  CHECK(out.find("ready:") != std::string::npos);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("serve with the MTP module drafting replies as plain serving does (stop strings, n = 2)", "[process]") {
  // The bundled model with a random MTP module (tests/model/mtp_checkpoint.h) and its tokenizer.
  TempDir dir;
  write_tiny_mtp_checkpoint(dir.path());
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"})
    std::filesystem::copy_file(tiny_dir() / f, dir / f);
  const std::vector<std::string> bodies = {
      R"({"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stop": ["ab", "\n"]})",
      R"({"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0.8, "n": 2, "seed": 3, "stop": ["e"]})",
      R"({"prompt": "The quick brown fox", "max_tokens": 32, "temperature": 0, "logprobs": 2})"};
  auto replies = [&](const std::vector<std::string>& extra) {
    ServeProcess p(with(with(kSmall, {"--model", dir.path().string()}), extra));
    REQUIRE(p.wait_log("ready:"));
    httplib::Client c("127.0.0.1", p.port());
    std::vector<Json> out;
    for (const std::string& b : bodies) {
      auto r = c.Post("/v1/completions", b, "application/json");
      REQUIRE(r);
      REQUIRE(r->status == 200);
      // Text and finish of every choice (logprobs may differ in the last bits: a verify step's
      // rows go through the GEMM with more rows than a decode step's).
      Json choices = Json::array();
      const Json reply = Json::parse(r->body);  // a range-for over a temporary's member would dangle
      for (const Json& ch : reply["choices"])
        choices.push_back({ch["text"], ch["finish_reason"], ch["stop_reason"]});
      out.push_back(choices);
    }
    auto m = c.Get("/metrics");
    REQUIRE(m);
    out.push_back(m->body);
    p.signal(SIGTERM);
    CHECK(p.wait_exit(std::chrono::seconds(30)) == 0);
    return out;
  };
  const std::vector<Json> plain = replies({});
  const std::vector<Json> mtp = replies({"--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 3})"});
  for (size_t i = 0; i < bodies.size(); ++i) {
    INFO(bodies[i]);
    CHECK(mtp[i].dump() == plain[i].dump());
  }
  const std::string metrics = mtp.back().get<std::string>();
  CHECK(metrics.find("vllm:spec_decode_num_draft_tokens_total") != std::string::npos);
  CHECK(metrics.find("vllm:spec_decode_num_drafts_total{model_name=") != std::string::npos);
}

TEST_CASE("serve loads a checkpoint's vision tower with an encoder budget for its largest image; "
          "--language-model-only refuses images", "[process]") {
  const std::filesystem::path vl = data_path("tiny-qwen35-vl");
  const std::string image = (vl / "images" / "square96.png").string();  // 96 x 96: 9 image tokens
  const Json body = {{"max_tokens", 2},
                     {"messages", Json::array({Json{{"role", "user"}, {"content", Json::array({
                         Json{{"type", "image_url"}, {"image_url", {{"url", "file://" + image}}}},
                         Json{{"type", "text"}, {"text", "What is it?"}}})}}})}};
  {
    // A step of 8 tokens is less than the image, and less than the fixture's largest image
    // (128 x 128 = 16 tokens): the encoder's budget is the larger (vLLM's), so the image is
    // encoded in one step and its prefill runs in chunks of 8.
    ServeProcess p(with(kSmall, {"--model", vl.string(), "--max-num-batched-tokens", "8",
                                 "--allowed-local-media-path", (vl / "images").string()}));
    REQUIRE(p.wait_log("ready:"));
    CHECK(p.log().find("vision tower: 2 blocks") != std::string::npos);
    CHECK(p.log().find("16 image tokens per step") != std::string::npos);
    httplib::Client c("127.0.0.1", p.port());
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    CHECK(r->status == 200);
    CHECK(Json::parse(r->body)["usage"]["prompt_tokens"].get<int64_t>() > 9);
    p.signal(SIGTERM);
    CHECK(p.wait_exit(std::chrono::seconds(30)) == 0);
  }
  ServeProcess p(with(kSmall, {"--model", vl.string(), "--language-model-only", "--allowed-local-media-path",
                               (vl / "images").string()}));
  REQUIRE(p.wait_log("ready:"));
  CHECK(p.log().find("vision tower: not loaded (--language-model-only)") != std::string::npos);
  httplib::Client c("127.0.0.1", p.port());
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(r);
  CHECK(r->status == 400);
  CHECK(r->body.find("--language-model-only") != std::string::npos);
  p.signal(SIGTERM);
  CHECK(p.wait_exit(std::chrono::seconds(30)) == 0);
}
