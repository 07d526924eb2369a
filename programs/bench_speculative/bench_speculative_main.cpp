// bench_speculative: what speculative decoding buys at a known acceptance rate, through the
// engine, on any weights (docs/bench-log, "Speculative decoding").
//
//   bench_speculative [--model DIR] [--backend auto] [--batches 1,8,32] [--ks 1,2,3,4]
//                     [--acceptance 0.5,0.7,0.9] [--prompt-len 256] [--output-len 256]
//                     [--kv-cache-memory 8GiB] [--repeat 3] [--method simulate|mtp|ngram]
//                     [--graphs on|off|on,off] [--json FILE]
//
// The model is loaded once. For each batch B, an Engine over it decodes B greedy requests
// (random prompts of --prompt-len, --output-len tokens each, ignore_eos) without
// speculation, then with each K and acceptance rate: the "simulate" method keeps the i-th
// draft with probability acceptance^i whatever the model samples (a simulated verdict,
// programs/bench_drafters/simulated_verdict.h), so the steps cost what steps at that
// acceptance cost while random weights would accept nothing. Decode tokens/s counts the
// tokens after each request's first, over the window from the last first token to the last
// finish; the median of --repeat runs. Reported next to it:
// the ratio to plain decoding at the same batch, the tokens a verify step emitted per
// sequence, and what a verify step cost in plain steps (tokens per step / ratio) -- 1.0 would
// be free verification, the ideal the ratio approaches.
//
// --method mtp drafts with the checkpoint's MTP module (loaded for it; a checkpoint without
// one is refused): acceptance 1 lets verification judge its drafts (the real acceptance,
// ~0 on random weights), a rate below 1 keeps them at that rate whatever the model samples
// (the simulated verdict again), so the steps carry the module's real cost -- one module
// step over the positions each forward computed, and K - 1 chained steps -- at a known
// acceptance.
// The module's share is printed per step: the engine's drafting time (every module step and
// its argmax, which waits for the device) over its iterations, and as a fraction of the
// engine's time in its steps.
// --graphs runs everything with recorded steps (CUDA graphs: EngineConfig::step_graphs, the
// default "on") and/or eagerly ("off"); with both, a last table compares the two.
// Each measurement runs its batch twice on one engine and times the second pass (the first
// records the step shapes); each line also prints the model call's time per engine step and
// the recordings made and replayed in the timed pass.
// --json FILE writes every measurement (plain rows have K 0) as a result file
// (programs/bench_result/result_file.h).
// Exit status 1 when a request ends other than by length or emits the wrong number of tokens.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "programs/bench_drafters/simulated_drafter.h"
#include "programs/bench_drafters/simulated_verdict.h"
#include "programs/bench_result/result_file.h"
#include "scheduler/engine.h"
#include "server/model_loader.h"

using namespace ds;
using namespace ds::scheduler;

namespace {

template <typename T>
std::vector<T> parse_list(const std::string& s) {
  std::vector<T> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) v.push_back(static_cast<T>(std::stod(item)));
  return v;
}

constexpr uint64_t spec_seed = 3;

struct Setup {
  int32_t batch = 1;
  int64_t prompt_len = 256, output_len = 256, cache_bytes = 0;
  uint64_t seed = 1;
  bool graphs = true;  // EngineConfig::step_graphs
};

struct Result {
  double tokens_per_s = 0;
  double tokens_per_verify = 0;  // per sequence and verify step: 1 + accepted drafts
  double draft_ms_per_step = 0;  // the drafter's time (the MTP module's steps) per engine step
  double draft_share = 0;        // and its fraction of the engine's time in steps
  double forward_ms_per_step = 0;  // the model call per engine step (verify or decode)
  int64_t graphs_recorded = 0, graphs_replayed = 0;  // during the timed pass
  bool ok = true;
};

// One measurement: the batch runs twice on one engine and the second pass is timed, so that
// the recordings of the step shapes (made during the first pass) are not charged to it, as in
// a server whose engine lives on.
// spec.method: "" (plain), "ngram", "mtp" (the engine's drafters; mtp below acceptance 1 with
// a simulated verdict) or "simulate" (prompt-token drafts and a simulated verdict).
Result run_once(ForwardModel& forward, qwen35::Model& model, kernels::Backend& backend, const Setup& s,
                const SpeculativeConfig& spec, double acceptance = 1) {
  EngineConfig ec;
  ec.scheduler.max_num_seqs = s.batch;
  // Every prompt in one prefill step, so all requests decode together from the start.
  ec.scheduler.max_num_batched_tokens = std::max<int64_t>(2048, s.batch * (s.prompt_len + 16));
  ec.cache_bytes = s.cache_bytes;
  ec.max_ctx = s.prompt_len + s.output_len + 16;
  ec.speculative = spec;
  ec.step_graphs = s.graphs;
  bench::SimulatedVerdict verdict{nullptr, server::make_sampler(backend).sampler};
  std::unique_ptr<Drafter> drafter;
  if (spec.method == "simulate" || (spec.method == "mtp" && acceptance < 1))
    verdict = bench::simulated_verdict(forward, std::move(verdict.sampler), acceptance, spec_seed);
  if (spec.method == "simulate") drafter = std::make_unique<bench::SimulatedDrafter>(spec_seed);
  Engine engine(verdict.model ? *verdict.model : forward, ec, std::move(verdict.sampler), std::move(drafter));
  std::mt19937_64 rng(s.seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(forward.vocab_size() - 1));
  Result res;
  EngineStats before;
  for (int pass = 0; pass < 2; ++pass) {
    res = Result{};
    before = engine.stats();
    const qwen35::Model::StepGraphStats g0 = model.step_graph_stats();
    std::vector<RequestHandle> handles;
    for (int32_t i = 0; i < s.batch; ++i) {
      std::vector<int32_t> prompt(static_cast<size_t>(s.prompt_len));
      for (int32_t& t : prompt) t = id(rng);
      Request r(std::move(prompt));
      r.max_tokens = s.output_len;
      r.ignore_eos = true;
      r.sampling.temperature = 0;
      SubmitResult sr = engine.submit(std::move(r));
      if (!sr.ok()) throw std::runtime_error("submit refused: " + sr.message);
      handles.push_back(std::move(sr.handle));
    }
    int64_t tokens = 0;
    Clock::time_point first{}, last{};
    for (RequestHandle& h : handles) {
      int64_t n = 0;
      for (const RequestEvent& e : h.collect()) {
        if (e.token >= 0) ++n;
        if (!e.is_final()) continue;
        if (*e.finish != FinishReason::length) res.ok = false;
        first = std::max(first, e.metrics.first_token), last = std::max(last, e.metrics.finished);
      }
      if (n != s.output_len) res.ok = false;
      tokens += n - 1;
    }
    res.tokens_per_s = static_cast<double>(tokens) / RequestMetrics::seconds(first, last);
    const qwen35::Model::StepGraphStats g1 = model.step_graph_stats();
    res.graphs_recorded = g1.recorded - g0.recorded;
    res.graphs_replayed = g1.replayed - g0.replayed;
  }
  const EngineStats st = engine.stats();
  const double steps = static_cast<double>(st.iterations_total - before.iterations_total);
  const double drafts = static_cast<double>(st.spec_decode_drafts_total - before.spec_decode_drafts_total);
  if (drafts > 0)
    res.tokens_per_verify =
        1.0 + static_cast<double>(st.spec_decode_accepted_tokens_total - before.spec_decode_accepted_tokens_total) / drafts;
  if (steps > 0) {
    const double draft = st.draft_seconds_total - before.draft_seconds_total;
    const double forward_s = st.forward_seconds_total - before.forward_seconds_total;
    const double busy = draft + st.schedule_seconds_total - before.schedule_seconds_total + forward_s +
                        st.sample_seconds_total - before.sample_seconds_total;
    res.draft_ms_per_step = 1e3 * draft / steps;
    res.forward_ms_per_step = 1e3 * forward_s / steps;
    res.draft_share = busy > 0 ? draft / busy : 0;
  }
  return res;
}

Result run(ForwardModel& forward, qwen35::Model& model, kernels::Backend& backend, Setup s,
           const SpeculativeConfig& spec, double acceptance, int repeat) {
  std::vector<Result> rs;
  for (int i = 0; i < repeat; ++i, ++s.seed) rs.push_back(run_once(forward, model, backend, s, spec, acceptance));
  std::sort(rs.begin(), rs.end(), [](const Result& a, const Result& b) { return a.tokens_per_s < b.tokens_per_s; });
  Result mid = rs[rs.size() / 2];
  for (const Result& r : rs) mid.ok = mid.ok && r.ok;
  return mid;
}

struct Row {
  bool graphs;
  int32_t batch, k;
  double acceptance;
  int32_t draft_vocab;  // mtp: SpeculativeConfig::draft_vocab_size (0: every token)
  Result r;
  double plain;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Speculative decoding at controlled acceptance against plain decoding, through the engine."};
  server::ServerOptions o;
  o.model = DELTASERVE_DEFAULT_MODEL;
  std::string batches_s = "1,8,32", ks_s = "1,2,3,4", acceptance_s = "0.5,0.7,0.9", method = "simulate";
  std::string cache = "8GiB", graphs_s = "on", backend = "auto", draft_vocabs_s = "0";
  Setup setup;
  int repeat = 3;
  app.add_option("--model", o.model, "Checkpoint directory")->capture_default_str();
  app.add_option("--backend", backend, "cpu, cuda or auto")->capture_default_str();
  app.add_option("--batches", batches_s, "Concurrent sequences, comma-separated")->capture_default_str();
  app.add_option("--ks", ks_s, "Drafted tokens per step, comma-separated")->capture_default_str();
  app.add_option("--acceptance", acceptance_s, "Acceptance rates, comma-separated")->capture_default_str();
  app.add_option("--method", method,
                 "Drafter: simulate (controlled acceptance), mtp (the checkpoint's MTP module; controlled "
                 "acceptance below 1) or ngram")
      ->capture_default_str();
  app.add_option("--draft-vocabs", draft_vocabs_s,
                 "mtp: the drafting vocabularies to compare, comma-separated (draft_vocab_size; 0: every token)")
      ->capture_default_str();
  app.add_option("--prompt-len", setup.prompt_len)->capture_default_str();
  app.add_option("--output-len", setup.output_len)->capture_default_str();
  app.add_option("--kv-cache-memory", cache, "Cache pool bytes per engine")->capture_default_str();
  app.add_option("--repeat", repeat, "Runs per configuration (median)")->capture_default_str();
  app.add_option("--graphs", graphs_s, "Recorded steps (CUDA graphs): on, off, or on,off (both, compared)")
      ->capture_default_str();
  std::string json_path;
  app.add_option("--json", json_path, "Also write the measurements to FILE as JSON (bench/README.md)");
  CLI11_PARSE(app, argc, argv);
  bench::ResultFile result("bench_speculative", argc, argv);
  spdlog::set_level(spdlog::level::warn);

  const auto batches = parse_list<int32_t>(batches_s);
  std::vector<bool> graph_modes;
  {
    std::stringstream ss(graphs_s);
    std::string m;
    while (std::getline(ss, m, ',')) {
      if (m != "on" && m != "off") return std::fprintf(stderr, "bench_speculative: --graphs: on, off or on,off\n"), 2;
      graph_modes.push_back(m == "on");
    }
    if (graph_modes.empty()) return std::fprintf(stderr, "bench_speculative: --graphs: on, off or on,off\n"), 2;
  }
  const auto ks = parse_list<int32_t>(ks_s);
  const auto draft_vocabs = method == "mtp" ? parse_list<int32_t>(draft_vocabs_s) : std::vector<int32_t>{0};
  const bool controlled = method == "simulate" || method == "mtp";
  const auto rates = controlled ? parse_list<double>(acceptance_s) : std::vector<double>{0};
  o.backend = server::parse_backend(backend);
  o.kv_cache_memory = server::parse_bytes(cache);
  // The MTP module is loaded only when a speculative config asks for it.
  if (method == "mtp") o.speculative = {.method = "mtp", .num_speculative_tokens = 1};
  o.prefix_caching = false;
  o.max_num_seqs = *std::max_element(batches.begin(), batches.end());
  setup.cache_bytes = server::parse_bytes(cache);
  std::unique_ptr<server::LoadedModel> lm;
  try {
    lm = server::load_model(o, o.model, false, nullptr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_speculative: %s\n", e.what());
    return 2;
  }
  lm->engine.reset();  // each measurement builds its own
  std::printf("model %s on %s; prompt %lld, output %lld tokens, greedy; median of %d\n", o.model.c_str(),
              std::string(lm->backend->name()).c_str(), static_cast<long long>(setup.prompt_len),
              static_cast<long long>(setup.output_len), repeat);

  Setup warm = setup;
  warm.batch = o.max_num_seqs;
  warm.output_len = std::min<int64_t>(setup.output_len, 16);
  run_once(*lm->forward, *lm->model, *lm->backend, warm, {});

  std::vector<Row> rows;
  bool ok = true;
  for (bool graphs : graph_modes)
  for (int32_t b : batches) {
    Setup s = setup;
    s.batch = b;
    s.graphs = graphs;
    const char* mode = graphs ? "graphs" : "eager";
    const Result plain = run(*lm->forward, *lm->model, *lm->backend, s, {}, 1, repeat);
    ok = ok && plain.ok;
    rows.push_back({graphs, b, 0, 0, 0, plain, plain.tokens_per_s});
    std::printf("%s batch %3d plain               %9.1f tok/s  forward %.3f ms/step  graphs recorded %lld replayed %lld\n",
                mode, b, plain.tokens_per_s, plain.forward_ms_per_step, static_cast<long long>(plain.graphs_recorded),
                static_cast<long long>(plain.graphs_replayed));
    std::fflush(stdout);
    for (int32_t k : ks)
      for (double a : rates)
      for (int32_t dv : draft_vocabs) {
        SpeculativeConfig spec;
        spec.method = method;
        spec.num_speculative_tokens = k;
        spec.draft_vocab_size = dv;
        if (std::string e = spec.validate(method == "simulate"); !e.empty()) throw std::invalid_argument(e);
        if (!(a >= 0 && a <= 1)) throw std::invalid_argument("--acceptance: rates in [0, 1]");
        const Result r = run(*lm->forward, *lm->model, *lm->backend, s, spec, controlled ? a : 1, repeat);
        ok = ok && r.ok;
        rows.push_back({graphs, b, k, a, dv, r, plain.tokens_per_s});
        std::printf("%s batch %3d K %d acceptance %.2f vocab %d %9.1f tok/s  %.2fx plain  %.2f tokens/step  drafting "
                    "%.3f ms/step (%.0f%%)  forward %.3f ms/step  graphs recorded %lld replayed %lld\n",
                    mode, b, k, a, dv, r.tokens_per_s, r.tokens_per_s / plain.tokens_per_s, r.tokens_per_verify,
                    r.draft_ms_per_step, 100 * r.draft_share, r.forward_ms_per_step,
                    static_cast<long long>(r.graphs_recorded), static_cast<long long>(r.graphs_replayed));
        std::fflush(stdout);
      }
  }
  std::printf("\n%s drafts\n| graphs | batch | K | acceptance | draft vocabulary | plain tok/s | speculative tok/s | "
              "x plain | tokens per verify step | verify step in plain steps | drafting ms/step | drafting share |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
              method.c_str());
  for (const Row& w : rows) {
    if (w.k == 0) continue;  // the plain runs
    const double ratio = w.r.tokens_per_s / w.plain;
    std::printf("| %s | %d | %d | %.2f | %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.3f | %.0f%% |\n",
                w.graphs ? "on" : "off", w.batch, w.k, w.acceptance,
                w.draft_vocab ? std::to_string(w.draft_vocab).c_str() : "all", w.plain, w.r.tokens_per_s, ratio, w.r.tokens_per_verify,
                w.r.tokens_per_verify / ratio, w.r.draft_ms_per_step, 100 * w.r.draft_share);
  }
  result.set("model", o.model);
  result.set("backend", std::string(lm->backend->name()));
  result.set("method", method);
  result.set("prompt_len", setup.prompt_len);
  result.set("output_len", setup.output_len);
  for (const Row& w : rows) {
    const std::string what = std::string(w.graphs ? "graphs" : "eager") + " batch " + std::to_string(w.batch) +
                             (w.k == 0 ? std::string(" plain") : " K " + std::to_string(w.k) + " acceptance " +
                                                                       std::to_string(w.acceptance).substr(0, 4)) +
                             (w.draft_vocab ? " draft vocab " + std::to_string(w.draft_vocab) : std::string());
    result.add(what, w.r.tokens_per_s, "tok/s",
               {{"graphs", w.graphs}, {"batch", w.batch}, {"k", w.k}, {"acceptance", w.acceptance},
                {"draft_vocab", w.draft_vocab},
                {"x_plain", w.r.tokens_per_s / w.plain}, {"tokens_per_verify", w.r.tokens_per_verify},
                {"draft_ms_per_step", w.r.draft_ms_per_step}, {"draft_share", w.r.draft_share},
                {"forward_ms_per_step", w.r.forward_ms_per_step}});
  }
  try {
    result.write(json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_speculative: %s\n", e.what());
    return 1;
  }
  if (graph_modes.size() == 2) {
    // The same configuration with graphs off and on, side by side (K 0: plain decoding).
    std::printf("\n| batch | K | acceptance | eager tok/s | graphs tok/s | graphs / eager |\n|---|---|---|---|---|---|\n");
    for (const Row& on : rows) {
      if (!on.graphs) continue;
      for (const Row& off : rows)
        if (!off.graphs && off.batch == on.batch && off.k == on.k && off.acceptance == on.acceptance &&
            off.draft_vocab == on.draft_vocab)
          std::printf("| %d | %d | %.2f | %.0f | %.0f | %.2f |\n", on.batch, on.k, on.acceptance, off.r.tokens_per_s,
                      on.r.tokens_per_s, on.r.tokens_per_s / off.r.tokens_per_s);
    }
  }
  if (!ok) std::fprintf(stderr, "bench_speculative: a request ended early or with the wrong token count\n");
  return ok ? 0 : 1;
}
