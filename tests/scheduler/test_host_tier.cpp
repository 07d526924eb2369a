// The prefix cache's host tier through the engine on the checking FakeModel (fake_model.h):
// blocks and snapshots the tiny device cache evicts go to the host tier and load back, and
// the fake checks on every step that the K/V read through a table hashes to the slot's state
// -- a load read early, one landing in memory reused after a cancellation, or a host slot
// rewritten under a load breaks it. Outputs are compared with FakeModel::reference_tokens, a
// cold run computed without the engine.
#include <catch2/catch.hpp>

#include <random>
#include <thread>

#include "engine_test_util.h"
#include "fake_model.h"
#include "scheduler/engine.h"

using namespace ds;
using namespace ds::scheduler;
using ds::test::collect;
using ds::test::FakeModel;
using ds::test::Outcome;

namespace {

EngineConfig tier_config(int32_t blocks, int32_t snapshots, bool host, int32_t max_seqs = 4) {
  EngineConfig c = ds::test::fake_engine_config(blocks, 16, max_seqs, 64);
  c.prefix_caching = true;
  c.num_snapshots = snapshots;
  c.host_cache_bytes = host ? int64_t{1} << 20 : 0;
  return c;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t len) {
  std::uniform_int_distribution<int32_t> d(0, 63);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = d(rng);
  return p;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Request turn(const std::vector<int32_t>& history, int64_t max_tokens = 10) {
  Request r(history);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  r.cache_points = {static_cast<int64_t>(history.size()) - 1};  // as the server names a chat prompt's end
  return r;
}

// Nothing runs, every slot is free, every block is the cache's alone, and no load pins the
// host tier.
void check_quiet(const Engine& e) {
  REQUIRE(test::wait_stats(e, [](const EngineStats& s) { return s.running == 0 && s.waiting == 0; }));
  const EngineStats s = e.stats();
  CHECK(s.slots_used == 0);
  CHECK(s.blocks_used == s.prefix_cache_blocks);
  CHECK(s.prefix_cache_evictable == s.prefix_cache_blocks);
  CHECK(s.host_loading == 0);
  CHECK(s.host_cache_pinned == 0);
  CHECK(s.invariant_violations == 0);
}

struct SessionRun {
  int64_t cached_total = 0;
  int64_t revisit_shortfall = 0;  // turns whose hit fell short of the previous prompt
};

// `sessions` conversations, each `turns` turns, visited round-robin one request at a time:
// every turn's prompt extends the previous one's, and the other sessions' turns in between
// push it out of the tiny device cache.
SessionRun run_sessions(Engine& engine, FakeModel& model, int sessions, int turns, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> history(static_cast<size_t>(sessions));
  std::vector<int64_t> previous(static_cast<size_t>(sessions), 0);
  for (auto& h : history) h = random_tokens(rng, 70);
  SessionRun out;
  for (int t = 0; t < turns; ++t) {
    for (int s = 0; s < sessions; ++s) {
      INFO("turn " << t << ", session " << s);
      auto& h = history[static_cast<size_t>(s)];
      const Request r = turn(h);
      auto sub = engine.submit(r);
      REQUIRE(sub.ok());
      const Outcome o = collect(sub.handle);
      REQUIRE(o.finish == FinishReason::length);
      CHECK(o.tokens == model.reference_tokens(h, 10, {}, 1 << 20, r.sampling, 0));
      const int64_t cached = o.last.metrics.cached_tokens;
      out.cached_total += cached;
      const int64_t want = previous[static_cast<size_t>(s)] > 0 ? (previous[static_cast<size_t>(s)] - 1) / 16 * 16 : 0;
      if (cached < want) ++out.revisit_shortfall;
      previous[static_cast<size_t>(s)] = static_cast<int64_t>(h.size());
      h = concat(concat(h, o.tokens), random_tokens(rng, 30));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("host tier: multi-turn sessions evicted from the device come back from the host, outputs exact", "[host]") {
  // 40 blocks of 16 hold about two sessions' prompts; six sessions take turns.
  FakeModel off_model(64), on_model(64);
  Engine off(off_model, tier_config(40, 2, false), kernels::cpu::make_cpu_sampler());
  Engine on(on_model, tier_config(40, 2, true), kernels::cpu::make_cpu_sampler());
  const SessionRun without = run_sessions(off, off_model, 6, 4, 11);
  const SessionRun with = run_sessions(on, on_model, 6, 4, 11);
  // With the tier every revisit resumes at least where the previous prompt's last block ended;
  // without it the device has evicted most of them.
  CHECK(with.revisit_shortfall == 0);
  CHECK(without.revisit_shortfall > 0);
  CHECK(with.cached_total > without.cached_total);
  const EngineStats s = on.stats();
  CHECK(s.host_cache_hits_total > 0);
  CHECK(s.host_cache_hit_tokens_total > 0);
  CHECK(s.host_cache_stored_blocks_total > 0);
  CHECK(s.host_cache_stored_snapshots_total > 0);
  CHECK(s.host_cache_load_bytes_total > 0);
  CHECK(s.host_cache_offload_bytes_total > 0);
  CHECK(s.host_loads_total == s.host_cache_hits_total);
  CHECK(s.prefix_cache_hits_total >= s.host_cache_hit_tokens_total);
  CHECK(on_model.loads_landed() > 0);
  CHECK(on_model.violations() == 0);
  CHECK(off_model.violations() == 0);
  CHECK(off.stats().host_cache_hits_total == 0);
  check_quiet(on);
  check_quiet(off);
}

TEST_CASE("host tier: slow loads under concurrent traffic keep outputs exact", "[host]") {
  FakeModel model(64);
  model.load_delay = 3;  // a load lands three polls after it was issued
  Engine engine(model, tier_config(48, 2, true, 6), kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> history(8);
  for (auto& h : history) h = random_tokens(rng, 50 + static_cast<int64_t>(rng() % 40));
  for (int t = 0; t < 4; ++t) {
    std::vector<Request> reqs;
    std::vector<RequestHandle> hs;
    for (auto& h : history) {
      reqs.push_back(turn(h, 8));
      auto s = engine.submit(reqs.back());
      REQUIRE(s.ok());
      hs.push_back(std::move(s.handle));
    }
    for (size_t i = 0; i < hs.size(); ++i) {
      const Outcome o = collect(hs[i]);
      CHECK(o.tokens == model.reference_tokens(history[i], 8, {}, 1 << 20, reqs[i].sampling, 0));
      history[i] = concat(concat(history[i], o.tokens), random_tokens(rng, 20));
    }
  }
  CHECK(engine.stats().host_cache_hits_total > 0);
  CHECK(model.violations() == 0);
  check_quiet(engine);
}

TEST_CASE("host tier: a request cancelled while it loads leaks nothing, and others run meanwhile", "[host]") {
  FakeModel model(64);
  model.load_delay = 1 << 30;  // loads land only when waited for or fenced
  // One snapshot slot: every prompt's snapshot pushes the one before to the host tier.
  Engine engine(model, tier_config(2048, 1, true), kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(7);
  const std::vector<int32_t> a = random_tokens(rng, 100);
  auto run = [&](const Request& r) {
    auto s = engine.submit(r);
    REQUIRE(s.ok());
    return collect(s.handle);
  };
  const Outcome first = run(turn(a));
  run(turn(random_tokens(rng, 90)));  // its snapshot evicts a's to the host
  const std::vector<int32_t> a2 = concat(concat(a, first.tokens), random_tokens(rng, 20));

  // A long decode keeps steps coming while a2 waits on its load.
  Request longer = turn(random_tokens(rng, 40), 30000);
  auto l = engine.submit(longer);
  REQUIRE(l.ok());
  REQUIRE(test::wait_stats(engine, [](const EngineStats& s) { return s.running == 1 && s.generated_tokens_total > 0; }));
  auto loading = engine.submit(turn(a2));
  REQUIRE(loading.ok());
  REQUIRE(test::wait_stats(engine, [](const EngineStats& s) { return s.host_loading == 1; }));
  const int64_t before = engine.stats().generated_tokens_total;
  REQUIRE(test::wait_stats(engine, [&](const EngineStats& s) {
    return s.generated_tokens_total > before + 20 && s.host_loading == 1;  // the batch goes on without it
  }));
  loading.handle.cancel();
  const Outcome cancelled = collect(loading.handle);
  CHECK(cancelled.finish == FinishReason::cancelled);
  CHECK(cancelled.tokens.empty());
  REQUIRE(test::wait_stats(engine, [](const EngineStats& s) { return s.host_cache_pinned == 0 && s.host_loading == 0; }));
  CHECK(model.fenced_loads() == 1);  // the abandoned load was fenced before its memory was reused
  l.handle.cancel();
  collect(l.handle);
  check_quiet(engine);

  // The same turn alone: its load is waited for (nothing else runs) and its output is exact.
  const Request again = turn(a2);
  const Outcome o = run(again);
  CHECK(o.tokens == model.reference_tokens(a2, 10, {}, 1 << 20, again.sampling, 0));
  CHECK(o.last.metrics.cached_tokens >= (static_cast<int64_t>(a.size()) - 1) / 16 * 16);
  CHECK(engine.stats().host_cache_hits_total >= 2);
  CHECK(model.violations() == 0);
  check_quiet(engine);
}
