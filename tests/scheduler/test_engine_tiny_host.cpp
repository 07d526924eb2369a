// The prefix cache's host tier on the bundled tiny Qwen3.5 (CPU backend, or
// DELTASERVE_TEST_BACKEND=cuda on the GPU machine, where the copies are asynchronous on the
// backend's copy streams): a device cache too small for the prompts evicts their K/V blocks and
// DeltaNet snapshots to the host tier, later requests load them back, and their outputs are a
// cold run's -- the K/V and state bytes went to the host and came back intact.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "tiny_engine_fixture.h"

using namespace ds;
using namespace ds::scheduler;
using namespace ds::test;

TEST_CASE("tiny: outputs through host-tier hits equal a cold cache's", "[engine][tiny][host]") {
  Tiny& t = tiny();
  std::mt19937 rng(47);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> conv = random_prompt(rng, 40);
  for (int turn = 0; turn < 4; ++turn) {
    prompts.push_back(conv);
    const auto more = random_prompt(rng, 21 + 9 * turn);
    conv.insert(conv.end(), more.begin(), more.end());
  }
  for (const auto& p : t.prompts) prompts.push_back(p);
  std::vector<Request> reqs;
  for (const auto& p : prompts) {
    Request g = greedy_request(p, 10);
    g.sampling.logprobs = true;
    g.sampling.top_logprobs = 3;
    g.cache_points = {static_cast<int64_t>(p.size()) - 1};  // as the server names a chat prompt's end
    reqs.push_back(g);
  }
  const std::string be = test::test_backend_name();
  const bool cpu = be == "cpu";
  // As the device prefix cache's test (test_engine_tiny.cpp, "[prefix]"): exact on the CPU; on
  // a device a hit computes the tail in other GEMM shapes than the cold run.
  const double tolerance = cpu ? 1e-6 : test::test_backend_is_bf16() ? 5e-2 : 1e-3;
  auto compare = [&](const std::vector<Outcome>& cold, const std::vector<Outcome>& warm) {
    REQUIRE(cold.size() == warm.size());
    for (size_t i = 0; i < cold.size(); ++i) {
      INFO("request " << i << " on " << be);
      CHECK(Tiny::same_run(warm[i].tokens, cold[i].tokens));
      REQUIRE(!cold[i].events.empty());
      REQUIRE(!warm[i].events.empty());
      const double a = cold[i].events[0].logprob, b = warm[i].events[0].logprob;
      CHECK(std::fabs(a - b) / std::max(1.0, std::fabs(a)) < tolerance);
    }
  };

  std::vector<Outcome> cold;
  {
    Engine engine(t.forward, config(400), kernels::cpu::make_cpu_sampler());
    cold = run_alone(engine, reqs);
    check_pools_free(engine);
  }
  // 48 blocks of 16 (768 tokens: the 511-token prompt alone takes 32) and 2 device snapshots
  // for a dozen prompts: each request pushes earlier ones out to the host tier.
  EngineConfig cfg = config(48, 64, 8, 4096);
  cfg.prefix_caching = true;
  cfg.num_snapshots = 2;
  cfg.host_cache_bytes = int64_t{256} << 20;
  Engine engine(t.forward, cfg, kernels::cpu::make_cpu_sampler());
  REQUIRE(engine.host_tier().sizes.blocks > 0);
  REQUIRE(engine.host_tier().sizes.snapshots >= 16);
  const std::vector<Outcome> first = run_alone(engine, reqs);
  compare(cold, first);
  const std::vector<Outcome> second = run_alone(engine, reqs);
  compare(cold, second);
  // The second time every prompt resumes at its last whole block, from one tier or the other.
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    const int64_t len = static_cast<int64_t>(reqs[i].prompt->size());
    CHECK(second[i].last.metrics.cached_tokens == (len - 1) / 16 * 16);
  }
  const EngineStats s = engine.stats();
  CHECK(s.host_cache_hits_total > 0);
  CHECK(s.host_cache_hit_tokens_total >= 496);  // the 511-token prompt cannot have stayed on the device
  CHECK(s.host_cache_load_bytes_total > 0);
  // Everything at once: hits, loads, evictions and preemption together.
  const std::vector<Outcome> third = run_together(engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    CHECK(Tiny::same_run(third[i].tokens, cold[i].tokens));
  }
  REQUIRE(wait_stats(engine, [](const EngineStats& st) { return st.running == 0 && st.waiting == 0; }));
  const EngineStats q = engine.stats();
  CHECK(q.slots_used == 0);
  CHECK(q.blocks_used == q.prefix_cache_blocks);
  CHECK(q.host_cache_pinned == 0);
  CHECK(q.invariant_violations == 0);
}
