// Prefix caching through the engine on the checking FakeModel: every hit reads K/V through
// shared blocks and resumes from a copied state snapshot, and the fake checks on every step
// that the blocks' tokens hash to the slot's state, so a wrong block, a stale snapshot or a
// block overwritten by its sharer is a contract violation. Outputs are compared with
// FakeModel::reference_tokens, computed without the engine (a cold run).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
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

EngineConfig cached_config(int32_t blocks = 256, int32_t snapshots = 16, int32_t max_seqs = 8, int64_t budget = 64) {
  EngineConfig c = ds::test::fake_engine_config(blocks, 16, max_seqs, budget);
  c.prefix_caching = true;
  c.num_snapshots = snapshots;
  return c;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t len, int32_t vocab = 64) {
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = d(rng);
  return p;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Request greedy(std::vector<int32_t> prompt, int64_t max_tokens = 8) {
  Request r(std::move(prompt));
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  return r;
}

Outcome run(Engine& e, const Request& r) {
  auto s = e.submit(r);
  REQUIRE(s.ok());
  return collect(s.handle);
}

// After the work is done every block is held by the cache alone and every slot is free.
void check_quiet(const Engine& e) {
  REQUIRE(test::wait_stats(e, [](const EngineStats& s) { return s.running == 0 && s.waiting == 0; }));
  const EngineStats s = e.stats();
  CHECK(s.slots_used == 0);
  CHECK(s.blocks_used == s.prefix_cache_blocks);
  CHECK(s.prefix_cache_evictable == s.prefix_cache_blocks);
  CHECK(s.invariant_violations == 0);
}

}  // namespace

TEST_CASE("prefix caching: later turns resume from the previous prompt's last block", "[prefix]") {
  FakeModel model(64);
  Engine engine(model, cached_config(), kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(1);
  std::vector<int32_t> history = random_tokens(rng, 75);
  int64_t previous_prompt = 0;
  for (int turn = 0; turn < 4; ++turn) {
    INFO("turn " << turn);
    Request r = greedy(history, 12);
    r.cache_points = {static_cast<int64_t>(history.size()) - 1};  // as the server names a chat prompt's end
    const Outcome o = run(engine, r);
    CHECK(o.tokens == model.reference_tokens(history, 12, {}, 1 << 20, r.sampling, 0));
    const int64_t cached = o.last.metrics.cached_tokens;
    // At least the previous prompt's last block boundary.
    CHECK(cached >= (previous_prompt > 0 ? (previous_prompt - 1) / 16 * 16 : 0));
    CHECK(cached % 16 == 0);
    previous_prompt = static_cast<int64_t>(history.size());
    history = concat(concat(history, o.tokens), random_tokens(rng, 20));
  }
  CHECK(model.violations() == 0);
  CHECK(model.copy_calls() > 0);
  const EngineStats s = engine.stats();
  CHECK(s.prefix_cache_hits_total > 0);
  CHECK(s.prefix_cache_queries_total > s.prefix_cache_hits_total);
  check_quiet(engine);
}

TEST_CASE("prefix caching: the snapshot inside a prompt's last chunk costs no step; without a free slot the chunk ends there",
          "[prefix]") {
  std::mt19937 rng(9);
  for (int32_t max_seqs : {4, 1}) {
    // max_seqs 1: the only state slot is the sequence's own, none to stage the snapshot in.
    const bool staged = max_seqs > 1;
    INFO((staged ? "a free slot stages the snapshot" : "no free slot"));
    FakeModel model(64);
    Engine engine(model, cached_config(256, 16, max_seqs, 64), kernels::cpu::make_cpu_sampler());
    const auto prompt = random_tokens(rng, 40);
    Request r = greedy(prompt, 1);
    r.cache_points = {39};  // snapshot at 32, inside the one 40-token chunk
    const Outcome cold = run(engine, r);
    CHECK(cold.tokens == model.reference_tokens(prompt, 1, {}, 1 << 20, r.sampling, 0));
    CHECK(model.forward_calls() == (staged ? 1 : 2));
    CHECK(model.snapshot_rows() == (staged ? 1 : 0));
    // Either way the next request resumes from the snapshot at 32.
    const auto longer = concat(prompt, random_tokens(rng, 30));
    Request r2 = greedy(longer, 4);
    const Outcome warm = run(engine, r2);
    CHECK(warm.last.metrics.cached_tokens == 32);
    CHECK(warm.tokens == model.reference_tokens(longer, 4, {}, 1 << 20, r2.sampling, 0));
    CHECK(model.violations() == 0);
    check_quiet(engine);
  }
}

TEST_CASE("prefix caching: a chat turn snapshots its branch point and its prompt's end in one chunk", "[prefix]") {
  FakeModel model(64);
  Engine engine(model, cached_config(256, 16, 4, 64), kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(10);
  // Turn 1: 40 tokens, 20 generated; its blocks up to 48 stay cached, its snapshot is at 32.
  const auto prompt1 = random_tokens(rng, 40);
  Request r1 = greedy(prompt1, 20);
  r1.cache_points = {39};
  const Outcome o1 = run(engine, r1);
  // Turn 2 = turn 1 + its reply + 30 new tokens (90): it resumes at 32 and its one chunk holds
  // two points: 48, where it parts from turn 1's cached blocks, and 80, its prompt's end.
  const auto prompt2 = concat(concat(prompt1, o1.tokens), random_tokens(rng, 30));
  const int64_t calls = model.forward_calls(), rows = model.snapshot_rows();
  Request r2 = greedy(prompt2, 1);
  r2.cache_points = {89};
  const Outcome o2 = run(engine, r2);
  CHECK(o2.last.metrics.cached_tokens == 32);
  CHECK(o2.tokens == model.reference_tokens(prompt2, 1, {}, 1 << 20, r2.sampling, 0));
  CHECK(model.forward_calls() - calls == 1);
  CHECK(model.snapshot_rows() - rows == 2);
  // Turn 3 resumes at turn 2's prompt end; a sibling of turn 2 that parts at 48 from there.
  const auto prompt3 = concat(concat(prompt2, o2.tokens), random_tokens(rng, 10));
  CHECK(run(engine, greedy(prompt3, 2)).last.metrics.cached_tokens == 80);
  auto sibling = std::vector<int32_t>(prompt2.begin(), prompt2.begin() + 50);
  sibling[49] = (sibling[49] + 1) % 64;
  CHECK(run(engine, greedy(sibling, 2)).last.metrics.cached_tokens == 48);
  CHECK(model.violations() == 0);
  check_quiet(engine);
}

TEST_CASE("prefix caching: a repeated prompt hits all whole blocks but the last token's", "[prefix]") {
  FakeModel model(64);
  Engine engine(model, cached_config(), kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(2);
  for (int64_t len : {17, 32, 33, 48, 100}) {
    INFO("length " << len);
    const auto prompt = random_tokens(rng, len);
    Request r = greedy(prompt, 5);
    r.cache_points = {len - 1};
    const Outcome cold = run(engine, r);
    CHECK(cold.last.metrics.cached_tokens == 0);
    // Seeded sampling too: the draw must not depend on where the prefix came from.
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 7;
    const Outcome warm = run(engine, r);
    CHECK(warm.last.metrics.cached_tokens == (len - 1) / 16 * 16);
    CHECK(warm.tokens == model.reference_tokens(prompt, 5, {}, 1 << 20, r.sampling, 7));
  }
  CHECK(model.violations() == 0);
  check_quiet(engine);
}

TEST_CASE("prefix caching: requests arriving together share one prefill of their common prefix", "[prefix]") {
  FakeModel model(64);
  EngineConfig cfg = cached_config(256, 16, 8, 512);
  Engine engine(model, cfg, kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(3);
  const auto system = random_tokens(rng, 100);
  std::vector<Request> reqs;
  std::vector<RequestHandle> hs;
  for (int i = 0; i < 8; ++i) {
    Request r = greedy(concat(system, random_tokens(rng, 10 + i)), 4);
    r.cache_points = {100};  // the server names the end of the shared system prompt
    auto s = engine.submit(r);
    REQUIRE(s.ok());
    reqs.push_back(r);
    hs.push_back(std::move(s.handle));
  }
  int hits = 0;
  for (size_t i = 0; i < hs.size(); ++i) {
    const Outcome o = collect(hs[i]);
    CHECK(o.tokens == model.reference_tokens(*reqs[i].prompt, 4, {}, 1 << 20, reqs[i].sampling, 0));
    if (o.last.metrics.cached_tokens == 96) ++hits;
  }
  CHECK(hits == 7);  // all but the first
  // n > 1: identical prompts submitted together compute the prompt once (the server names the
  // prompt's end for the choices of one request, which may reach the engine a step apart).
  const auto prompt = random_tokens(rng, 70);
  const int64_t before = engine.stats().prefill_tokens_total;
  std::vector<RequestHandle> ns;
  for (int i = 0; i < 4; ++i) {
    Request r = greedy(prompt, 3);
    r.sampling.temperature = 0.8f;
    r.sampling.seed = 10 + static_cast<uint64_t>(i);
    r.cache_points = {69};
    auto s = engine.submit(r);
    REQUIRE(s.ok());
    ns.push_back(std::move(s.handle));
  }
  for (int i = 0; i < 4; ++i) {
    const Outcome o = collect(ns[static_cast<size_t>(i)]);
    Request r = greedy(prompt, 3);
    r.sampling.temperature = 0.8f;
    CHECK(o.tokens == model.reference_tokens(prompt, 3, {}, 1 << 20, r.sampling, 10 + static_cast<uint64_t>(i)));
  }
  // 70 prompt tokens once, then 70 - 64 for each other choice (plus their decodes).
  CHECK(engine.stats().prefill_tokens_total - before <= 70 + 3 * 6);
  CHECK(model.violations() == 0);
  check_quiet(engine);
}

TEST_CASE("prefix caching: eviction pressure and preemption keep outputs exact", "[prefix]") {
  FakeModel model(64);
  // 32 blocks of 16 and 3 snapshots for many different prompts: blocks and snapshots evicted
  // all the time, and decodes preempt when the cache cannot give blocks back.
  EngineConfig cfg = cached_config(32, 3, 6, 48);
  cfg.max_ctx = 200;
  Engine engine(model, cfg, kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(4);
  std::vector<std::vector<int32_t>> stems;
  for (int i = 0; i < 5; ++i) stems.push_back(random_tokens(rng, 40 + 13 * i));
  std::vector<Request> reqs;
  std::vector<RequestHandle> hs;
  for (int i = 0; i < 60; ++i) {
    Request r = greedy(concat(stems[rng() % stems.size()], random_tokens(rng, rng() % 20 + 1)), 40);
    if (i % 3 == 0) {
      r.sampling.temperature = 0.9f;
      r.sampling.seed = static_cast<uint64_t>(i);
    }
    auto s = engine.submit(r);
    REQUIRE(s.ok());
    reqs.push_back(r);
    hs.push_back(std::move(s.handle));
  }
  int64_t cached = 0;
  for (size_t i = 0; i < hs.size(); ++i) {
    const Outcome o = collect(hs[i]);
    const uint64_t seed = reqs[i].sampling.seed.value_or(0);
    CHECK(o.tokens == model.reference_tokens(*reqs[i].prompt, 40, {}, 200, reqs[i].sampling, seed));
    cached += o.last.metrics.cached_tokens;
  }
  CHECK(cached > 0);
  CHECK(engine.stats().preemptions_total > 0);
  CHECK(model.violations() == 0);
  check_quiet(engine);
}

TEST_CASE("prefix caching: randomized multi-turn traffic with cancellations", "[prefix][stress]") {
  std::mt19937 meta(55);
  for (int round = 0; round < 6; ++round) {
    FakeModel model(48, {47});
    EngineConfig cfg = cached_config(std::uniform_int_distribution<int32_t>(20, 120)(meta),
                                     std::uniform_int_distribution<int32_t>(0, 8)(meta),
                                     std::uniform_int_distribution<int32_t>(1, 8)(meta),
                                     std::uniform_int_distribution<int64_t>(1, 96)(meta));
    cfg.max_ctx = 16 * cfg.num_blocks / 2;
    if (round % 2) {  // speculative decoding beside the cache: drafts are never cached
      cfg.speculative.method = "ngram";
      cfg.speculative.num_speculative_tokens = 1 + round % 4;
    }
    Engine engine(model, cfg, kernels::cpu::make_cpu_sampler());
    INFO("round " << round << " blocks " << cfg.num_blocks << " snapshots " << cfg.num_snapshots << " seqs "
                  << cfg.scheduler.max_num_seqs << " budget " << cfg.scheduler.max_num_batched_tokens
                  << " speculative tokens " << cfg.speculative.num_speculative_tokens);
    // Conversations: each turn's prompt is the previous prompt + reply + a new message. Catch's
    // assertions are not thread-safe: the threads record, the test checks after the join.
    struct Turn {
      std::vector<int32_t> got, want;
      bool submitted = false;
    };
    std::vector<std::vector<Turn>> turns(6);
    auto conversation = [&](int id) {
      std::mt19937 rng(100 * round + id);
      std::vector<int32_t> history = random_tokens(rng, rng() % 60 + 1, 47);
      for (int turn = 0; turn < 5; ++turn) {
        if (static_cast<int64_t>(history.size()) + 8 >= cfg.max_ctx) break;
        Request r = greedy(history, rng() % 8 + 1);
        r.ignore_eos = rng() % 2;
        if (rng() % 3 == 0) {
          r.sampling.temperature = 1.0f;
          r.sampling.seed = rng();
        }
        if (rng() % 2) r.cache_points = {static_cast<int64_t>(rng() % history.size())};
        auto s = engine.submit(r);
        Turn t;
        t.submitted = s.ok();
        if (!t.submitted) {
          turns[static_cast<size_t>(id)].push_back(t);
          break;
        }
        if (rng() % 5 == 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
          s.handle.cancel();
          (void)collect(s.handle);
          continue;
        }
        const Outcome o = collect(s.handle);
        std::vector<int32_t> stops;
        if (!r.ignore_eos) stops.push_back(47);
        t.got = o.tokens;
        t.want = model.reference_tokens(history, r.max_tokens, stops, engine.max_ctx(), r.sampling,
                                        r.sampling.seed.value_or(0));
        turns[static_cast<size_t>(id)].push_back(t);
        history = concat(concat(history, o.tokens), random_tokens(rng, rng() % 20 + 1, 47));
      }
    };
    std::vector<std::thread> ts;
    for (int c = 0; c < 6; ++c) ts.emplace_back(conversation, c);
    for (auto& t : ts) t.join();
    int checked = 0;
    for (const auto& conv : turns)
      for (const Turn& t : conv) {
        CHECK(t.submitted);
        CHECK(t.got == t.want);
        ++checked;
      }
    CHECK(checked > 0);
    CHECK(model.violations() == 0);
    check_quiet(engine);
  }
}

TEST_CASE("prefix caching: a shared prefix nobody named is found where prompts part", "[prefix]") {
  FakeModel model(64);
  Engine engine(model, cached_config(256, 16, 8, 512), kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(6);
  const auto document = random_tokens(rng, 150);
  // One after another: the second finds the first's blocks past any snapshot and snapshots
  // where the prompts part; the third resumes there.
  std::vector<int64_t> cached;
  for (int i = 0; i < 3; ++i) {
    const Request r = greedy(concat(document, random_tokens(rng, 7)), 3);
    const Outcome o = run(engine, r);
    CHECK(o.tokens == model.reference_tokens(*r.prompt, 3, {}, 1 << 20, r.sampling, 0));
    cached.push_back(o.last.metrics.cached_tokens);
  }
  CHECK(cached[0] == 0);
  CHECK(cached[2] == 144);
  // Arriving together: the first one still prefilling snapshots where the others part from it.
  const auto other = random_tokens(rng, 150);
  std::vector<Request> reqs;
  std::vector<RequestHandle> hs;
  for (int i = 0; i < 8; ++i) {
    reqs.push_back(greedy(concat(other, random_tokens(rng, 5 + i)), 3));
    auto s = engine.submit(reqs.back());
    REQUIRE(s.ok());
    hs.push_back(std::move(s.handle));
  }
  int hits = 0;
  for (size_t i = 0; i < hs.size(); ++i) {
    const Outcome o = collect(hs[i]);
    CHECK(o.tokens == model.reference_tokens(*reqs[i].prompt, 3, {}, 1 << 20, reqs[i].sampling, 0));
    hits += o.last.metrics.cached_tokens == 144;
  }
  CHECK(hits >= 6);
  CHECK(model.violations() == 0);
  check_quiet(engine);
}
