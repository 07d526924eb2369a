// The engine over 4-bit weights: the tiny GPTQ and AWQ twins (tests/data/tiny-qwen35-gptq,
// -awq; on CUDA their weights stay 4-bit resident and the int4 GEMMs run) through what the
// engine composes with the weights -- batched requests with chunked prefill, prefix-cache hits,
// speculative decoding's verify chunks and recorded steps (CUDA graphs) -- give HF's greedy
// tokens of the dequantised checkpoint (the fixture's float64 reference) and each other's, and
// leave no block or slot behind. The bf16 engine tests (test_engine_tiny.cpp, ..._graphs.cpp)
// cover the same paths in depth; this checks that none of them assumes bf16 weights.
#include "tiny_engine_fixture.h"

using namespace ds;
using namespace ds::scheduler;
using namespace ds::test;

namespace {

// One 4-bit fixture on its own backend (the test backend's kind), with its reference.
struct Int4Tiny {
  explicit Int4Tiny(const std::string& name)
      : backend(test::make_test_backend()),
        model(qwen35::Model::load(*backend, test::data_path(name))),
        forward(*model),
        ref(test::data_path(name + "/reference.safetensors")) {
    for (int i = 0; i < ref.num_prompts(); ++i) {
      prompts.push_back(ref.ints("p" + std::to_string(i) + ".prompt"));
      greedy.push_back(ref.ints("p" + std::to_string(i) + ".greedy_tokens"));
    }
  }
  bool matches_greedy(const std::vector<int32_t>& tokens, size_t i) const {
    const std::vector<int32_t> want(greedy[i].begin(),
                                    greedy[i].begin() + static_cast<std::ptrdiff_t>(std::min(tokens.size(), greedy[i].size())));
    return follows_greedy(tokens, want, ref, "p" + std::to_string(i) + ".greedy_logits", "prompt " + std::to_string(i));
  }
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<qwen35::Model> model;
  Qwen35ForwardModel forward;
  qwen35::ReferenceFile ref;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<int32_t>> greedy;
};

// Loaded once per executable. Each a static of its own, constructed whole after the backend's
// own statics, so destroyed before them (a map made empty first would outlive them).
Int4Tiny& int4_tiny(const std::string& name) {
  if (name == "tiny-qwen35-gptq") {
    static Int4Tiny gptq(name);
    return gptq;
  }
  static Int4Tiny awq(name);
  return awq;
}

std::vector<Request> reference_requests(const Int4Tiny& t) {
  std::vector<Request> reqs;
  for (const auto& p : t.prompts) reqs.push_back(greedy_request(p));
  return reqs;
}

void check_greedy(const Int4Tiny& t, const std::vector<Outcome>& out) {
  for (size_t i = 0; i < t.prompts.size(); ++i) {
    INFO("prompt " << i << " (" << t.prompts[i].size() << " tokens)");
    CHECK(out[i].finish == FinishReason::length);
    CHECK(t.matches_greedy(out[i].tokens, i));
  }
}

}  // namespace

TEST_CASE("tiny int4: GPTQ and AWQ weights through chunked, cached, speculative and recorded steps", "[engine][tiny][int4]") {
  for (const std::string name : {"tiny-qwen35-gptq", "tiny-qwen35-awq"}) {
    DYNAMIC_SECTION(name) {
      Int4Tiny& t = int4_tiny(name);
      REQUIRE(t.prompts.size() >= 5);
      REQUIRE(t.model->config().int4.has_value());
      const std::vector<Request> reqs = reference_requests(t);

      // Together, a 16-token budget: every prompt past 16 tokens is prefilled in chunks beside
      // the others' decode rows.
      std::vector<Outcome> plain;
      {
        Engine engine(t.forward, config(400, 16), kernels::cpu::make_cpu_sampler());
        plain = run_together(engine, reqs);
        check_greedy(t, plain);
        check_pools_free(engine);
      }

      // Prefix caching: with the prompt's end a cache point (as the server names every
      // prompt's), the second pass of each prompt hits its whole blocks and gives the cold
      // run's tokens.
      {
        EngineConfig cfg = config(400);
        cfg.prefix_caching = true;
        cfg.num_snapshots = 32;
        Engine engine(t.forward, cfg, kernels::cpu::make_cpu_sampler());
        std::vector<Request> pointed = reqs;
        for (Request& r : pointed) r.cache_points = {static_cast<int64_t>(r.prompt->size()) - 1};
        const std::vector<Outcome> first = run_alone(engine, pointed);
        const std::vector<Outcome> second = run_alone(engine, pointed);
        int64_t hits = 0;
        for (size_t i = 0; i < reqs.size(); ++i) {
          INFO("prompt " << i);
          const int64_t len = static_cast<int64_t>(reqs[i].prompt->size());
          CHECK(second[i].last.metrics.cached_tokens == (len - 1) / 16 * 16);
          hits += second[i].last.metrics.cached_tokens;
          CHECK(Tiny::same_run(second[i].tokens, first[i].tokens));
          CHECK(t.matches_greedy(second[i].tokens, i));
        }
        CHECK(hits > 0);
        const EngineStats es = engine.stats();
        CHECK(es.prefix_cache_hits_total == hits);
        CHECK(es.running == 0);
      }

      // Speculative decoding: verify chunks of K + 1 rows through the 4-bit GEMMs.
      for (const std::string method : {"ngram", "replay"}) {
        INFO("speculative " << method);
        EngineConfig cfg = config(400);
        cfg.speculative.method = method;
        cfg.speculative.num_speculative_tokens = method == "ngram" ? 3 : 2;
        Engine engine(t.forward, cfg, kernels::cpu::make_cpu_sampler(), speculative_drafter(method, t.forward.vocab_size()));
        if (method == "replay") run_together(engine, reqs);  // what it replays
        const std::vector<Outcome> spec = run_together(engine, reqs);
        check_greedy(t, spec);
        if (test::test_backend_name() == "cpu")
          for (size_t i = 0; i < reqs.size(); ++i) CHECK(spec[i].tokens == plain[i].tokens);
        CHECK(engine.stats().spec_decode_drafts_total > 0);
        if (method == "replay") CHECK(engine.stats().spec_decode_accepted_tokens_total > 0);
        check_pools_free(engine);
      }

      // Recorded steps (CUDA graphs) replay the 4-bit decode GEMMs.
      if (t.backend->can_record_steps()) {
        EngineConfig cfg = config(400);
        cfg.step_graphs = true;
        std::vector<Request> more = reqs;
        for (int64_t n : {30, 34, 38}) more.push_back(greedy_request(t.prompts[static_cast<size_t>(n % 5)], n));
        Engine engine(t.forward, cfg, kernels::cpu::make_cpu_sampler());
        const std::vector<Outcome> out = run_together(engine, more);
        check_greedy(t, out);
        const qwen35::Model::StepGraphStats s = t.model->step_graph_stats();
        INFO("replayed " << s.replayed << ", recorded " << s.recorded << ", failed " << s.failed);
        CHECK(s.failed == 0);
        CHECK(s.replayed > 0);
        check_pools_free(engine);
      } else {
        WARN("the " << t.backend->name() << " backend records no steps: run with DELTASERVE_TEST_BACKEND=cuda");
      }
    }
  }
}
