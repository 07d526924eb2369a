// bench_serve: the serving benchmark. Sends a workload to any OpenAI-compatible server
// (ours, vLLM, SGLang, llama-server) over streaming requests and reports what its users see:
// time to first token, time per output token, inter-token latency, end-to-end latency and
// throughput, as a table and as vllm bench serve's result JSON (README.md, "Benchmarking a
// server"; results in docs/bench-log, "Serving").
//
// Exit status: 0 when every request succeeded, 2 when the run finished with failed requests
// (each counted and reported with its error), 1 when it could not run.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>

#include <CLI/CLI.hpp>

#include "programs/bench_serve/bench_options.h"
#include "programs/bench_serve/load_generator.h"
#include "programs/bench_serve/openai_client.h"
#include "programs/bench_serve/random_image.h"
#include "programs/bench_serve/random_video.h"
#include "programs/bench_serve/report.h"
#include "programs/bench_serve/video_timing.h"
#include "programs/bench_serve/request_body.h"
#include "programs/bench_serve/serving_metrics.h"
#include "programs/bench_serve/workload.h"

namespace {

using namespace ds::bench;

std::string resolve_model(const BenchOptions& o, const ServerAddress& address) {
  if (!o.model.empty()) return o.model;
  OpenAiClient client(address, o.api_key, o.request_timeout);
  const auto ids = client.list_models();
  if (ids.empty()) throw std::runtime_error("GET /v1/models lists no model; give --model");
  return ids.front();
}

// Warm-up: the first request of the workload, --warmup times, at the run's concurrency.
void warm_up(const BenchOptions& o, const ServerAddress& address, const RequestBody& body,
             const std::vector<Session>& sessions) {
  Session first;
  first.turns.push_back(sessions.front().turns.front());
  if (sessions.front().conversation)
    first.turns.front().input = conversation_messages(sessions.front(), {}, 0);
  const std::vector<Session> warm(static_cast<size_t>(o.warmup), first);
  LoadPlan plan;
  plan.max_concurrency = o.max_concurrency;
  plan.request_rate = std::numeric_limits<double>::infinity();
  plan.request_timeout = o.request_timeout;
  plan.progress = o.progress;
  plan.models = o.lora_modules;
  plan.title = "warm-up";
  const LoadRun run = run_load(address, o.api_key, body, warm, plan);
  const ServingMetrics m = summarize(run.results, run.duration, false);
  std::fprintf(stderr, "warm-up: %zu requests, %zu failed, %.2f s\n", run.results.size(), m.failed, run.duration);
  for (const ErrorGroup& e : m.errors) std::fprintf(stderr, "  warm-up %zu x %s\n", e.count, e.error.c_str());
}

int run(const BenchOptions& o) {
  const ServerAddress address = parse_base_url(o.base_url);
  const std::vector<Session> sessions = build_workload(o);
  const std::string model = resolve_model(o, address);
  const RequestBody body(o, model);

  RunInfo info;
  info.model = model;
  info.base_url = o.base_url;
  info.endpoint = o.endpoint;
  info.dataset = o.dataset;
  if (!o.image_size.empty())  // e.g. "random+2x448x448": two 448x448 images per request
    info.dataset += "+" + std::to_string(std::max(1, o.images_per_request)) + "x" + o.image_size;
  if (!o.video_size.empty()) {  // e.g. "random+video30sx1280x720@30"
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", o.video_seconds);
    char rate[32];
    std::snprintf(rate, sizeof rate, "%g", o.video_fps);
    info.dataset += std::string("+video") + secs + "sx" + o.video_size + "@" + rate;
  }
  info.label = o.label;
  info.sessions = sessions.size();
  info.requests = count_requests(sessions);
  info.max_concurrency = o.max_concurrency;
  info.request_rate = o.request_rate;
  info.warmup = o.warmup;
  info.seed = o.seed;
  size_t constrained = 0;
  for (const Session& s : sessions)
    for (const Turn& t : s.turns) constrained += t.structured ? 1 : 0;
  std::fprintf(stderr, "bench_serve: %zu requests (%s, %zu sessions; %zu constrained) to %s%s, model %s\n",
               info.requests, info.dataset.c_str(), info.sessions, constrained, o.base_url.c_str(), o.endpoint.c_str(),
               model.c_str());

  if (!o.video_size.empty()) {  // what one such clip costs a server's host before its engine
    int w = 0, h = 0;
    parse_image_size(o.video_size, w, h);
    std::fprintf(stderr, "%s\n",
                 time_video_host(random_mp4(w, h, o.video_seconds, o.video_fps, o.seed + 1)).summary().c_str());
  }
  if (o.warmup > 0) warm_up(o, address, body, sessions);

  LoadPlan plan;
  plan.max_concurrency = o.max_concurrency;
  plan.request_rate = o.request_rate;
  plan.seed = o.seed;
  plan.request_timeout = o.request_timeout;
  plan.progress = o.progress;
  plan.models = o.lora_modules;
  const LoadRun load = run_load(address, o.api_key, body, sessions, plan);
  const ServingMetrics m = summarize(load.results, load.duration, o.dataset == "multi-turn" || o.dataset == "agent");
  print_report(stdout, info, m);
  std::fflush(stdout);

  if (!o.result_json.empty()) {
    std::ofstream f(o.result_json);
    f << result_json(info, m, load.results).dump(1, ' ', false, Json::error_handler_t::replace) << '\n';
    if (!f) throw std::runtime_error("cannot write --result-json " + o.result_json);
  }
  return m.failed == 0 ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_serve: serving benchmark for OpenAI-compatible servers (flags as vllm bench serve)"};
  BenchOptions o;
  add_bench_options(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  o.num_prompts_given = app.count("--num-prompts") > 0;
  if (const std::string problem = validate_options(o); !problem.empty()) {
    std::fprintf(stderr, "bench_serve: %s\n", problem.c_str());
    return 1;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_serve: %s\n", e.what());
    return 1;
  }
}
