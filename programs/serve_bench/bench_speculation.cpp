#include "programs/serve_bench/bench_speculation.h"

#include <memory>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "programs/bench_drafters/replay_drafter.h"
#include "programs/bench_drafters/simulated_drafter.h"
#include "programs/bench_drafters/simulated_verdict.h"
#include "server/json.h"
#include "server/speculative_option.h"

namespace ds::bench {
namespace {

[[noreturn]] void bad(const std::string& m) { throw std::invalid_argument("--speculative-config: " + m); }

}  // namespace

BenchSpeculation parse_bench_speculation(const std::string& text) {
  server::Json j = server::parse_json(text);
  if (j.is_discarded() || !j.is_object()) bad("expected a JSON object, e.g. '{\"method\": \"simulate\", ...}'");
  BenchSpeculation s;
  if (j.contains("acceptance_rate")) {
    if (!j["acceptance_rate"].is_number()) bad("acceptance_rate must be a number");
    s.acceptance_rate = j["acceptance_rate"].get<double>();
    if (!(s.acceptance_rate >= 0 && s.acceptance_rate <= 1)) bad("acceptance_rate must be in [0, 1]");
    j.erase("acceptance_rate");
  }
  if (j.contains("seed")) {
    if (!j["seed"].is_number_unsigned()) bad("seed must be a non-negative integer");
    s.seed = j["seed"].get<uint64_t>();
    j.erase("seed");
  }
  // The bench-only methods borrow serve's checks of the other keys under a method it knows.
  const std::string method = j.contains("method") && j["method"].is_string() ? j["method"].get<std::string>() : "";
  const bool handed = method == "replay" || method == "simulate";
  if (handed) j["method"] = "ngram";
  s.config = server::parse_speculative_config(j.dump());
  if (handed) s.config.method = method;
  return s;
}

void compose_speculation(const BenchSpeculation& spec, server::EngineParts& parts) {
  const std::string& method = spec.config.method;
  if (method == "replay") {
    parts.drafter = std::make_unique<ReplayDrafter>(parts.model->vocab_size(), spec.acceptance_rate, spec.seed);
    return;
  }
  if (!spec.simulated()) return;  // ngram, mtp: the engine's own drafters
  SimulatedVerdict v = simulated_verdict(std::move(parts.model), std::move(parts.sampler), spec.acceptance_rate,
                                         spec.seed);
  parts.model = std::move(v.model);
  parts.sampler = std::move(v.sampler);
  if (method == "simulate") parts.drafter = std::make_unique<SimulatedDrafter>(spec.seed);
  spdlog::warn("speculative method \"{}\" with acceptance_rate {} is for benchmarks: each step keeps drafts with that "
               "probability whatever the model samples, so replies are NOT the model's output",
               method, spec.acceptance_rate);
}

}  // namespace ds::bench
