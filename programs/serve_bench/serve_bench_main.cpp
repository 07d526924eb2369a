// serve_bench: `serve` with the knobs only benchmarks need, injected at this program's own
// composition root (server/model_loader.h, EngineComposer) so that the product carries none:
//  * --speculative-config also takes the controlled-acceptance forms (bench_speculation.h):
//    "replay", "simulate", and "mtp" with an acceptance_rate below 1 -- serving-level runs of
//    speculative decoding at a known acceptance on random weights (bench/studies/spec_decode_9b.json);
//  * --contiguous-baseline: every sequence reserves max-ctx tokens of K/V (and its state slot)
//    when admitted, so the sequences that run are budget / (max-ctx K/V + a slot), each never
//    preempted; prefix caching is off. The blocks stay paged (every backend has only the paged
//    attention kernels): this compares capacity and admission with the paged pool, not kernels.
// Everything else is serve's: the same flags, start-up, API and shutdown (run_server).
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "programs/serve_bench/bench_speculation.h"
#include "server/serve_run.h"
#include "server/server_options.h"

int main(int argc, char** argv) {
  ds::server::ServerOptions o;
  ds::bench::BenchSpeculation spec;
  bool contiguous = false;
  CLI::App app{"serve_bench: serve with benchmark-only speculative decoding at a controlled acceptance and the "
               "contiguous baseline (replies under a simulated verdict are NOT the model's output)"};
  ds::server::add_server_options(app, o);
  app.remove_option(app.get_option("--speculative-config"));
  app.add_option_function<std::string>(
      "--speculative-config",
      [&spec](const std::string& text) {
        try {
          spec = ds::bench::parse_bench_speculation(text);
        } catch (const std::invalid_argument& e) {
          throw CLI::ValidationError(e.what());
        }
      },
      "Speculative decoding as JSON: serve's forms (ngram, mtp), or for benchmarks \"replay\" (drafts spoiled at "
      "1 - acceptance_rate), \"simulate\" (drafts kept at acceptance_rate whatever the model samples) and \"mtp\" "
      "with acceptance_rate below 1; \"seed\" seeds them");
  app.add_flag("--contiguous-baseline", contiguous,
               "Every sequence reserves max-ctx tokens of K/V when admitted (capacity A/B runs against the paged "
               "pool; prefix caching off)");
  CLI11_PARSE(app, argc, argv);
  o.speculative = spec.config;
  return ds::server::run_server(o, argv[0], [&](ds::server::EngineParts& parts) {
    if (contiguous) {
      parts.config.reserve_tokens = parts.config.max_ctx;
      parts.config.prefix_caching = false;
      parts.config.snapshot_bytes = 0;
    }
    ds::bench::compose_speculation(spec, parts);
  });
}
