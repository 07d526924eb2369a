// The engine's acceptance tests on the real thing: the bundled tiny Qwen3.5 checkpoint on the
// CPU backend, checked against HF's greedy tokens (reference.safetensors) and against each
// request run alone.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tiny_engine_fixture.h"

using namespace ds;
using namespace ds::scheduler;
using namespace ds::test;

TEST_CASE("tiny: 16 concurrent greedy requests match each alone and the HF reference", "[engine][tiny][batch]") {
  Tiny& t = tiny();
  REQUIRE(t.prompts.size() == 8);
  std::vector<Request> reqs = reference_requests();
  // Eight more prompts of other lengths between 1 and 511 (12 tokens each: they have no
  // reference, only their runs alone, and the sanitizer pass pays for every step).
  std::mt19937 rng(16);
  for (int64_t len : {2, 9, 31, 48, 100, 150, 257, 300}) reqs.push_back(greedy_request(random_prompt(rng, len), 12));

  Engine engine(t.forward, config(600), kernels::cpu::make_cpu_sampler());
  const std::vector<Outcome> together = run_together(engine, reqs);
  CHECK(engine.stats().last_batch_seqs >= 1);
  const std::vector<Outcome> alone = run_alone(engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i << ", prompt of " << reqs[i].prompt->size() << " tokens");
    CHECK(together[i].finish == FinishReason::length);
    CHECK(together[i].tokens.size() == static_cast<size_t>(reqs[i].max_tokens));
    CHECK(Tiny::same_run(together[i].tokens, alone[i].tokens));
    if (i < t.greedy.size()) CHECK(t.matches_greedy(together[i].tokens, i));
    if (i < t.greedy.size()) CHECK(t.matches_greedy(alone[i].tokens, i));
  }
  check_pools_free(engine);
}

TEST_CASE("tiny: chunked prefill gives the same tokens for any token budget", "[engine][tiny][chunked]") {
  Tiny& t = tiny();
  // Prompts of 5, 17, 63, 65 and 200 tokens (350 in all): a budget of 1 token costs one
  // forward per prompt token and per decode, so the 511-token prompt stays out of this one.
  const std::vector<size_t> which = {1, 2, 3, 5, 6};
  std::vector<Request> reqs;
  for (size_t i : which) reqs.push_back(greedy_request(t.prompts[i]));
  std::vector<std::vector<int32_t>> first;
  for (int64_t budget : {1, 7, 64, 4096}) {
    INFO("max_num_batched_tokens " << budget);
    Engine engine(t.forward, config(600, budget), kernels::cpu::make_cpu_sampler());
    const std::vector<Outcome> out = run_together(engine, reqs);
    for (size_t k = 0; k < reqs.size(); ++k) {
      INFO("prompt " << which[k]);
      CHECK(t.matches_greedy(out[k].tokens, which[k]));
      if (budget == 1)
        first.push_back(out[k].tokens);
      else
        CHECK(Tiny::same_run(out[k].tokens, first[k]));
    }
    check_pools_free(engine);
    const EngineStats s = engine.stats();
    if (budget == 1) CHECK(s.iterations_total >= 350 + 5 * (kRefTokens - 1));  // one token a step
    if (budget == 7) CHECK(s.last_batch_tokens <= 7);
  }
}

TEST_CASE("tiny: preemption under a small pool keeps every output", "[engine][tiny][preemption]") {
  Tiny& t = tiny();
  const std::vector<Request> reqs = reference_requests();
  // With a large pool these eight requests give exactly the reference tokens (the batch
  // invariance test runs them so, 600 blocks); here they must give them again.
  // 36 blocks of 16 = 576 tokens: room for the longest request (511 + 24) but not for all
  // eight at once (about 75 blocks).
  Engine engine(t.forward, config(36, 256, 16, 576), kernels::cpu::make_cpu_sampler());
  const std::vector<Outcome> small = run_together(engine, reqs);
  int preempted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("prompt " << i);
    CHECK(t.matches_greedy(small[i].tokens, i));
    preempted += small[i].last.metrics.preemptions > 0;
  }
  CHECK(engine.stats().preemptions_total > 0);
  CHECK(preempted > 0);
  check_pools_free(engine);
}

namespace {

// Refuses (std::invalid_argument, before running anything) every batch holding `poison`.
class PoisonModel final : public ForwardingModel {
 public:
  PoisonModel(ForwardModel& inner, int32_t poison) : ForwardingModel(inner), poison_(poison) {}
  const kernels::Tensor& forward(const qwen35::ForwardBatch& b) override {
    for (const auto& c : b.seqs)
      for (int32_t tok : c.tokens)
        if (tok == poison_) throw std::invalid_argument("poisoned token " + std::to_string(tok));
    return inner_.forward(b);
  }

 private:
  int32_t poison_;
};

}  // namespace

TEST_CASE("tiny: completed, cancelled and failed requests leave the pools fully free", "[engine][tiny][free]") {
  Tiny& t = tiny();
  const int32_t poison = 1023;
  PoisonModel poisoned(t.forward, poison);
  test::GatedModel model(poisoned);
  Engine engine(model, config(200, 64, 8), kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(3);

  // Hold the engine at its 3rd forward with everything submitted, so cancels and the
  // poisoned prompt meet requests in every phase.
  model.hold_at(3);
  std::vector<RequestHandle> complete, cancel_queued, cancel_running, failing;
  auto poison_free = [&](Request r) {
    r.sampling.logit_bias = {{poison, -100.0f}};  // never generate the poison itself
    return r;
  };
  // Budget 64: these two are prefilling by the 3rd step (150 + 150 tokens).
  for (int i = 0; i < 2; ++i) {
    auto s = engine.submit(poison_free(greedy_request(random_prompt(rng, 150), 1000)));
    REQUIRE(s.ok());
    cancel_running.push_back(std::move(s.handle));
  }
  for (int i = 0; i < 3; ++i) {
    auto s = engine.submit(poison_free(greedy_request(t.prompts[static_cast<size_t>(i + 1)], 6)));
    REQUIRE(s.ok());
    complete.push_back(std::move(s.handle));
  }
  for (int i = 0; i < 2; ++i) {
    std::vector<int32_t> p = random_prompt(rng, 20);
    p[10] = poison;
    auto s = engine.submit(greedy_request(p, 5));
    REQUIRE(s.ok());
    failing.push_back(std::move(s.handle));
  }
  REQUIRE(model.wait_entered(3));
  for (int i = 0; i < 3; ++i) {
    auto s = engine.submit(poison_free(greedy_request(random_prompt(rng, 40), 5)));
    REQUIRE(s.ok());
    cancel_queued.push_back(std::move(s.handle));
  }
  for (auto& h : cancel_queued) h.cancel();
  for (auto& h : cancel_running) h.cancel();
  model.open();

  for (size_t i = 0; i < complete.size(); ++i) {
    Outcome o = collect(complete[i]);
    CHECK(o.finish == FinishReason::length);
    CHECK(o.tokens.size() == 6);
    CHECK(t.matches_greedy(o.tokens, i + 1));
  }
  for (auto& h : cancel_queued) {
    Outcome o = collect(h);
    CHECK(o.finish == FinishReason::cancelled);
    CHECK_FALSE(o.last.metrics.was_scheduled);
  }
  for (auto& h : cancel_running) {
    Outcome o = collect(h);
    CHECK(o.finish == FinishReason::cancelled);
    CHECK(o.last.metrics.was_scheduled);
  }
  for (auto& h : failing) {
    Outcome o = collect(h);
    CHECK(o.finish == FinishReason::error);
    CHECK(o.last.error.find("poisoned") != std::string::npos);
  }
  check_pools_free(engine);
  const EngineStats s = engine.stats();
  CHECK(s.requests_finished_length_total == 3);
  CHECK(s.requests_cancelled_total == 5);
  CHECK(s.requests_failed_total == 2);
}

TEST_CASE("tiny: a request reaching max_ctx ends with reason length", "[engine][tiny][max_ctx]") {
  Tiny& t = tiny();
  Engine engine(t.forward, config(100, 256, 4, 80), kernels::cpu::make_cpu_sampler());
  REQUIRE(engine.max_ctx() == 80);
  // 63-token prompt, room for 17 more tokens.
  auto a = engine.submit(greedy_request(t.prompts[3], 1000));
  REQUIRE(a.ok());
  Outcome o = collect(a.handle);
  CHECK(o.finish == FinishReason::length);
  CHECK(o.tokens.size() == 17);
  CHECK(t.matches_greedy(o.tokens, 3));
  // A prompt of exactly max_ctx ends at once; a longer one is refused.
  std::mt19937 rng(80);
  auto full = engine.submit(greedy_request(random_prompt(rng, 80), 5));
  REQUIRE(full.ok());
  Outcome of = collect(full.handle);
  CHECK(of.finish == FinishReason::length);
  CHECK(of.tokens.empty());
  CHECK(engine.submit(greedy_request(random_prompt(rng, 81), 5)).status == SubmitStatus::prompt_too_long);
  check_pools_free(engine);
}

TEST_CASE("tiny: a seeded request samples the same tokens alone and in a busy batch", "[engine][tiny][seeded]") {
  Tiny& t = tiny();
  Request seeded(t.prompts[2]);
  seeded.max_tokens = 20;
  seeded.ignore_eos = true;
  seeded.sampling.temperature = 1.2f;
  seeded.sampling.top_k = 200;
  seeded.sampling.top_p = 0.97f;
  seeded.sampling.repetition_penalty = 1.1f;
  seeded.sampling.frequency_penalty = 0.2f;
  seeded.sampling.seed = 1234;
  seeded.sampling.logprobs = true;
  seeded.sampling.top_logprobs = 5;

  Engine engine(t.forward, config(600, 96), kernels::cpu::make_cpu_sampler());
  const Outcome alone = run_together(engine, {seeded})[0];
  REQUIRE(alone.tokens.size() == 20);

  // The same request among greedy, unseeded sampled and long-prefill neighbours, arriving
  // after they started.
  std::mt19937 rng(7);
  std::vector<RequestHandle> busy;
  for (int i = 0; i < 8; ++i) {
    Request r(random_prompt(rng, 20 + 30 * i));
    r.max_tokens = 20;
    r.ignore_eos = true;
    r.sampling.temperature = i % 2 ? 0.0f : 1.0f;
    auto s = engine.submit(r);
    REQUIRE(s.ok());
    busy.push_back(std::move(s.handle));
  }
  REQUIRE(busy[0].next());
  auto s = engine.submit(seeded);
  REQUIRE(s.ok());
  Outcome crowded = collect(s.handle);
  for (auto& h : busy) collect(h);
  REQUIRE(crowded.events.size() == alone.events.size());
  // On the CPU the batch changes nothing: the same tokens and logprobs. On a GPU the batch
  // changes the rounding (other GEMM algorithms and chunk boundaries for other batch shapes,
  // and they differ by card: an H100 picks other cuBLAS algorithms than an H200), so logprobs
  // agree loosely (bf16 5e-2, f32 1e-3) and a sampled token may flip where the draw falls near
  // a boundary of the distribution: compare up to the first difference.
  const bool on_cpu = test::test_backend_name() == "cpu";
  const bool bf16 = test::test_backend_is_bf16();
  if (on_cpu) CHECK(Tiny::same_run(crowded.tokens, alone.tokens));
  for (size_t k = 0; k < alone.events.size(); ++k) {
    if (!on_cpu && crowded.events[k].token != alone.events[k].token) break;
    CHECK(crowded.events[k].logprob == Approx(alone.events[k].logprob).margin(on_cpu ? 1e-4 : bf16 ? 5e-2 : 1e-3));
    REQUIRE(crowded.events[k].top_logprobs.size() == 5);
    if (!bf16) CHECK(crowded.events[k].top_logprobs[0].token == alone.events[k].top_logprobs[0].token);
  }

  // Another seed samples something else (it really samples).
  Request other = seeded;
  other.sampling.seed = 4321;
  CHECK(run_together(engine, {other})[0].tokens != alone.tokens);
  check_pools_free(engine);
}

TEST_CASE("tiny: randomized arrivals, cancels and pool sizes on the real model", "[engine][tiny][random]") {
  Tiny& t = tiny();
  std::mt19937 meta(31);
  int64_t iterations = 0, preemptions = 0;
  for (int round = 0; round < 3; ++round) {
    const int64_t max_ctx = 112;
    const int32_t blocks = 7 + std::uniform_int_distribution<int32_t>(0, 3)(meta);  // 7 blocks = max_ctx
    const int64_t budget = std::uniform_int_distribution<int64_t>(1, 64)(meta);
    const int32_t seqs = std::uniform_int_distribution<int32_t>(2, 8)(meta);
    INFO("round " << round << " blocks " << blocks << " budget " << budget << " max_num_seqs " << seqs);
    Engine engine(t.forward, config(blocks, budget, seqs, max_ctx), kernels::cpu::make_cpu_sampler());

    std::vector<Request> reqs;
    std::vector<RequestHandle> hs;
    std::mutex mu;
    std::thread submitter([&] {
      std::mt19937 rng(100 + round);
      for (int i = 0; i < 12; ++i) {
        Request r = greedy_request(random_prompt(rng, std::uniform_int_distribution<int64_t>(1, 60)(rng)),
                                   std::uniform_int_distribution<int64_t>(1, 40)(rng));
        auto s = engine.submit(r);
        std::lock_guard lock(mu);
        reqs.push_back(r);
        hs.push_back(std::move(s.handle));
        if (rng() % 3 == 0 && hs.size() > 1) hs[rng() % hs.size()].cancel();
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 4));
      }
    });
    submitter.join();

    std::vector<Request> finished_reqs;
    std::vector<std::vector<int32_t>> finished_tokens;
    for (size_t i = 0; i < hs.size(); ++i) {
      REQUIRE(hs[i].valid());
      Outcome o = collect(hs[i]);
      REQUIRE(o.finals == 1);
      REQUIRE(o.finish);
      REQUIRE(*o.finish != FinishReason::error);
      if (*o.finish != FinishReason::cancelled) {
        finished_reqs.push_back(reqs[i]);
        finished_tokens.push_back(o.tokens);
      }
    }
    check_pools_free(engine);
    iterations += engine.stats().iterations_total;
    preemptions += engine.stats().preemptions_total;
    // Every completed request produced what it produces alone.
    const std::vector<Outcome> alone = run_alone(engine, finished_reqs);
    for (size_t i = 0; i < finished_reqs.size(); ++i) CHECK(Tiny::same_run(finished_tokens[i], alone[i].tokens));
  }
  WARN("tiny stress: " << iterations << " iterations, " << preemptions << " preemptions");
  CHECK(iterations > 100);
}

TEST_CASE("tiny: outputs through prefix-cache hits equal a cold cache's, at every hit length",
          "[engine][tiny][prefix]") {
  Tiny& t = tiny();
  std::mt19937 rng(31);
  // Prompts that extend one another (a conversation) and the fixture prompts, each asked for
  // greedy tokens and for seeded samples with their top logprobs.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> conv = random_prompt(rng, 40);
  for (int turn = 0; turn < 4; ++turn) {
    prompts.push_back(conv);
    const auto more = random_prompt(rng, 9 + 7 * turn);
    conv.insert(conv.end(), more.begin(), more.end());
  }
  for (const auto& p : t.prompts) prompts.push_back(p);
  std::vector<Request> reqs;
  for (const auto& p : prompts) {
    Request g = greedy_request(p, 12);
    g.sampling.logprobs = true;
    g.sampling.top_logprobs = 5;
    reqs.push_back(g);
    Request s = g;
    s.sampling.temperature = 0.8f;
    s.sampling.top_k = 40;
    s.sampling.seed = 1234;
    reqs.push_back(s);
  }
  // The CPU backend's prefill is exact whatever the chunking, so a hit must give what a cold
  // run gives, logprobs to float rounding. On CUDA a hit computes the prompt's tail in other
  // GEMM shapes than the cold run: f32 weights agree to ~1e-4 (tokens of greedy runs exactly,
  // top-logprob ties may swap), bf16 (not batch-invariant) on the first greedy token; a seeded
  // draw at temperature 0.8 may flip at a CDF boundary under that noise, so on CUDA seeded
  // requests are compared by length only.
  const std::string be = test::test_backend_name();
  const bool cpu = be == "cpu";
  const bool bf16 = test::test_backend_is_bf16();
  const double tolerance = cpu ? 1e-6 : bf16 ? 5e-2 : 1e-3;
  auto compare = [&](const std::vector<Outcome>& cold, const std::vector<Outcome>& warm) {
    REQUIRE(cold.size() == warm.size());
    auto diff = [](double a, double b) { return std::fabs(a - b) / std::max(1.0, std::fabs(a)); };
    for (size_t i = 0; i < cold.size(); ++i) {
      INFO("request " << i << " on " << be);
      const bool seeded = reqs[i].sampling.temperature > 0;
      CHECK(warm[i].tokens.size() == cold[i].tokens.size());
      if (!cpu && seeded) continue;
      CHECK(Tiny::same_run(warm[i].tokens, cold[i].tokens));
      REQUIRE(!cold[i].events.empty());
      REQUIRE(!warm[i].events.empty());
      // Logprobs of the events both runs share (bf16: the first).
      const size_t events = bf16 ? 1 : std::min(cold[i].events.size(), warm[i].events.size());
      double worst = 0;
      for (size_t e = 0; e < events; ++e) {
        const auto& a = cold[i].events[e];
        const auto& b = warm[i].events[e];
        worst = std::max(worst, diff(a.logprob, b.logprob));
        REQUIRE(a.top_logprobs.size() == b.top_logprobs.size());
        for (size_t k = 0; k < a.top_logprobs.size(); ++k) {
          if (cpu) CHECK(a.top_logprobs[k].token == b.top_logprobs[k].token);
          worst = std::max(worst, diff(a.top_logprobs[k].logprob, b.top_logprobs[k].logprob));
        }
      }
      CHECK(worst < tolerance);
    }
  };

  // Cold: no prefix caching at all.
  std::vector<Outcome> cold;
  {
    Engine engine(t.forward, config(400), kernels::cpu::make_cpu_sampler());
    cold = run_alone(engine, reqs);
    check_pools_free(engine);
  }
  // Warm: the same requests one after another, then all again: the second time every prompt
  // of 17+ tokens hits (the conversation's turns hit from the first time on).
  EngineConfig cfg = config(400);
  cfg.prefix_caching = true;
  cfg.num_snapshots = 32;
  Engine engine(t.forward, cfg, kernels::cpu::make_cpu_sampler());
  const std::vector<Outcome> first = run_alone(engine, reqs);
  compare(cold, first);
  const std::vector<Outcome> second = run_alone(engine, reqs);
  compare(cold, second);
  std::set<int64_t> hit_lengths;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const int64_t len = static_cast<int64_t>(reqs[i].prompt->size());
    CHECK(second[i].last.metrics.cached_tokens == (len - 1) / 16 * 16);
    hit_lengths.insert(second[i].last.metrics.cached_tokens);
  }
  CHECK(hit_lengths.count(16) == 1);
  CHECK(hit_lengths.count(48) == 1);
  CHECK(hit_lengths.count(496) == 1);
  // Under eviction pressure and preemption: everything at once on a pool of 34 blocks, two
  // more than the longest request needs (admission waits for whole prompts, so it is the
  // decodes' growth that preempts).
  {
    EngineConfig small = config(34, 64, 8, 4096);
    small.prefix_caching = true;
    small.num_snapshots = 4;
    Engine pressured(t.forward, small, kernels::cpu::make_cpu_sampler());
    (void)run_together(pressured, reqs);  // fills the cache
    const std::vector<Outcome> third = run_together(pressured, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      INFO("request " << i);
      if (cpu || reqs[i].sampling.temperature == 0) CHECK(Tiny::same_run(third[i].tokens, cold[i].tokens));
    }
    const EngineStats s = pressured.stats();
    CHECK(s.preemptions_total > 0);
    CHECK(s.prefix_cache_hits_total > 0);
    CHECK(s.invariant_violations == 0);
  }
}
