// The engine on the checking FakeModel: the API (statuses, events, metrics, cancellation,
// shutdown), fault isolation, preemption, and a long randomized stress run. Every expected
// token sequence comes from FakeModel::reference_tokens, computed without the engine.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "engine_checks.h"
#include "fake_model.h"
#include "programs/bench_drafters/replay_drafter.h"
#include "scheduler/engine.h"

using namespace ds;
using namespace ds::scheduler;
using ds::test::check_pools_free;
using ds::test::collect;
using ds::test::FakeModel;
using ds::test::GatedModel;
using ds::test::Outcome;

namespace {

EngineConfig small_config(int32_t blocks = 64, int32_t block_size = 4, int32_t max_seqs = 8,
                          int64_t budget = 32) {
  return ds::test::fake_engine_config(blocks, block_size, max_seqs, budget);
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int64_t len, int64_t vocab) {
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = d(rng);
  return p;
}

std::vector<int32_t> stop_ids_for(const FakeModel& m, const Request& r) {
  std::vector<int32_t> s = r.stop_token_ids;
  if (!r.ignore_eos) {
    auto eos = m.eos_token_ids();
    s.insert(s.end(), eos.begin(), eos.end());
  }
  return s;
}

}  // namespace

TEST_CASE("engine: greedy requests produce the reference tokens, with ordered events and metrics", "[engine]") {
  FakeModel model(64, {63});
  Engine engine(model, small_config(), kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(1);
  std::vector<Request> reqs;
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 6; ++i) {
    Request r(random_prompt(rng, 1 + 7 * i, 64));
    r.max_tokens = 5 + i;
    r.sampling.temperature = 0;
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = 2;
    auto s = engine.submit(r);
    REQUIRE(s.ok());
    reqs.push_back(r);
    handles.push_back(std::move(s.handle));
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    Outcome o = collect(handles[i]);
    const auto want = model.reference_tokens(*reqs[i].prompt, reqs[i].max_tokens, stop_ids_for(model, reqs[i]),
                                             1 << 20, reqs[i].sampling, 0);
    CHECK(o.tokens == want);
    CHECK(o.finals == 1);
    REQUIRE(o.finish);
    CHECK(*o.finish == (want.back() == 63 ? FinishReason::stop : FinishReason::length));
    // Every token event carries logprobs; times never go backwards.
    for (size_t k = 0; k < o.events.size(); ++k) {
      if (o.events[k].token < 0) continue;
      CHECK(o.events[k].top_logprobs.size() == 2);
      CHECK(o.events[k].logprob <= 0.0f);
      if (k) CHECK(o.events[k - 1].time <= o.events[k].time);
    }
    const RequestMetrics& m = o.last.metrics;
    CHECK(m.was_scheduled);
    CHECK(m.submitted <= m.first_scheduled);
    CHECK(m.first_scheduled <= m.first_token);
    CHECK(m.first_token <= m.finished);
    CHECK(m.prompt_tokens == static_cast<int64_t>(reqs[i].prompt->size()));
    CHECK(m.generated_tokens == static_cast<int64_t>(want.size()));
  }
  check_pools_free(engine);
  const EngineStats s = engine.stats();
  CHECK(s.requests_submitted_total == 6);
  CHECK(s.iterations_total > 0);
  CHECK(s.prompt_tokens_total == 1 + 8 + 15 + 22 + 29 + 36);
  CHECK(model.violations() == 0);
}

TEST_CASE("engine: submit refuses bad requests with distinct statuses", "[engine]") {
  FakeModel model(64);
  EngineConfig cfg = small_config();
  cfg.max_ctx = 20;
  Engine engine(model, cfg, kernels::cpu::make_cpu_sampler());
  CHECK(engine.max_ctx() == 20);
  CHECK(engine.submit(Request()).status == SubmitStatus::invalid_request);
  CHECK(engine.submit(Request({1, 64})).status == SubmitStatus::invalid_request);
  CHECK(engine.submit(Request({-1})).status == SubmitStatus::invalid_request);
  Request zero({1});
  zero.max_tokens = 0;
  CHECK(engine.submit(zero).status == SubmitStatus::invalid_request);
  Request bad({1});
  bad.sampling.top_p = 2;
  auto r = engine.submit(bad);
  CHECK(r.status == SubmitStatus::invalid_request);
  CHECK(r.message.find("top_p") != std::string::npos);
  auto too_long = engine.submit(Request(std::vector<int32_t>(21, 1)));
  CHECK(too_long.status == SubmitStatus::prompt_too_long);
  CHECK_FALSE(too_long.handle.valid());

  // A prompt of exactly max_ctx is accepted and ends at once with reason length, no token.
  auto full = engine.submit(Request(std::vector<int32_t>(20, 1)));
  REQUIRE(full.ok());
  Outcome o = collect(full.handle);
  CHECK(o.tokens.empty());
  CHECK(o.finish == FinishReason::length);
  CHECK(engine.stats().requests_rejected_total == 6);
}

TEST_CASE("engine: the pool lowers max_ctx when it cannot hold one full sequence", "[engine]") {
  FakeModel model(64);
  EngineConfig cfg = small_config(10, 4);
  cfg.max_ctx = 1000;
  Engine engine(model, cfg, kernels::cpu::make_cpu_sampler());
  CHECK(engine.max_ctx() == 40);
  CHECK(engine.stats().max_ctx == 40);
}

TEST_CASE("engine: a full queue fails fast with queue_full", "[engine]") {
  FakeModel fake(64);
  GatedModel model(fake);
  EngineConfig cfg = small_config();
  cfg.max_queue = 3;
  Engine engine(model, cfg, kernels::cpu::make_cpu_sampler());
  model.close();
  auto first = engine.submit(Request({1, 2, 3}));
  REQUIRE(first.ok());
  REQUIRE(model.wait_entered(1));  // the engine thread is now held inside forward
  std::vector<RequestHandle> queued;
  for (int i = 0; i < 3; ++i) {
    auto s = engine.submit(Request({4, 5}));
    REQUIRE(s.ok());
    queued.push_back(std::move(s.handle));
  }
  auto over = engine.submit(Request({6}));
  CHECK(over.status == SubmitStatus::queue_full);
  // Cancelling a queued request while the engine is busy is honoured once it looks.
  queued[0].cancel();
  model.open();
  Outcome c = collect(queued[0]);
  CHECK(c.finish == FinishReason::cancelled);
  CHECK(c.tokens.empty());
  CHECK_FALSE(c.last.metrics.was_scheduled);
  CHECK(collect(first.handle).finish == FinishReason::length);
  for (size_t i = 1; i < queued.size(); ++i) CHECK(collect(queued[i]).finish == FinishReason::length);
  // With the queue drained there is room again.
  auto again = engine.submit(Request({6}));
  CHECK(again.ok());
  CHECK(collect(again.handle).finals == 1);
  check_pools_free(engine);
}

TEST_CASE("engine: cancel anywhere ends the request once and frees its cache", "[engine]") {
  FakeModel fake(64);
  GatedModel model(fake);
  Engine engine(model, small_config(64, 4, 4, 8), kernels::cpu::make_cpu_sampler());
  // The engine stops inside its k-th forward from now; a cancel then lands at a known step.
  auto hold_after = [&](int k) {
    const int n = model.entered();
    model.hold_at(n + k);
    return n + k;
  };

  // Decoding.
  Request long_req(std::vector<int32_t>(8, 5));  // one prefill step at 8 tokens a step
  long_req.max_tokens = 100000;
  long_req.ignore_eos = true;
  const int held_a = hold_after(3);  // prefill, one decode, held in the second decode
  auto a = engine.submit(long_req);
  REQUIRE(a.ok());
  REQUIRE(model.wait_entered(held_a));
  engine.cancel(a.handle.id());
  model.open();
  Outcome oa = collect(a.handle);
  CHECK(oa.finish == FinishReason::cancelled);
  CHECK(oa.finals == 1);
  CHECK(oa.last.token == -1);
  CHECK(oa.tokens.size() == 3);  // the held decode completes before the cancel is read

  // Prefilling a 200-token prompt 8 tokens a step.
  const int before_b = model.entered();
  model.close();
  auto b = engine.submit(Request(std::vector<int32_t>(200, 7)));
  REQUIRE(b.ok());
  REQUIRE(model.wait_entered(before_b + 1));
  b.handle.cancel();
  model.open();
  Outcome ob = collect(b.handle);
  CHECK(ob.finish == FinishReason::cancelled);
  CHECK(ob.tokens.empty());
  CHECK(ob.last.metrics.was_scheduled);

  // Dropping a handle cancels its request.
  {
    const int held_c = hold_after(3);
    auto c = engine.submit(long_req);
    REQUIRE(c.ok());
    REQUIRE(model.wait_entered(held_c));
  }
  model.open();
  check_pools_free(engine);
  CHECK(engine.stats().requests_cancelled_total == 3);
  // Cancelling unknown or finished ids is harmless.
  engine.cancel(12345);
  engine.cancel(a.handle.id());
  CHECK(fake.violations() == 0);
}

TEST_CASE("engine: shutdown drains or cancels, and refuses new work", "[engine]") {
  FakeModel fake(64);
  RequestHandle survivor;
  {
    Engine engine(fake, small_config(), kernels::cpu::make_cpu_sampler());
    Request r({1, 2, 3});
    r.max_tokens = 50;
    auto s = engine.submit(r);
    REQUIRE(s.ok());
    survivor = std::move(s.handle);
    engine.shutdown(std::chrono::seconds(60));  // long enough to finish
    CHECK(engine.submit(r).status == SubmitStatus::shutting_down);
    engine.shutdown();  // idempotent
  }
  Outcome o = collect(survivor);
  CHECK(o.finish == FinishReason::length);
  CHECK(o.tokens.size() == 50);

  GatedModel model(fake);
  RequestHandle cut;
  {
    Engine engine(model, small_config(), kernels::cpu::make_cpu_sampler());
    Request r({1, 2, 3});
    r.max_tokens = 100000000;
    r.ignore_eos = true;
    const int held = model.entered() + 3;
    model.hold_at(held);
    auto s = engine.submit(r);
    REQUIRE(s.ok());
    cut = std::move(s.handle);
    REQUIRE(model.wait_entered(held));
    // Shut down while the engine is mid-step; once submit says so, the stop is in.
    std::thread stopper([&] { engine.shutdown(); });
    while (engine.submit(Request({1})).status != SubmitStatus::shutting_down) std::this_thread::yield();
    model.open();
    stopper.join();
  }
  Outcome c = collect(cut);
  CHECK(c.finish == FinishReason::cancelled);
  cut.cancel();  // the engine is gone: a no-op
}

TEST_CASE("engine: on_finish sees every request once, read or not", "[engine]") {
  FakeModel model(64);
  std::mutex mu;
  std::map<RequestId, std::vector<FinishReason>> seen;
  EngineConfig cfg = small_config();
  cfg.on_finish = [&](RequestId id, FinishReason r, const RequestMetrics& m) {
    std::lock_guard lock(mu);
    seen[id].push_back(r);
    if (m.finished < m.submitted) seen[id].push_back(FinishReason::error);  // impossible times
  };
  RequestId read_id = 0, dropped_id = 0, detached_id = 0;
  {
    Engine engine(model, cfg, kernels::cpu::make_cpu_sampler());
    auto a = engine.submit(Request({1, 2}));
    REQUIRE(a.ok());
    read_id = a.handle.id();
    collect(a.handle);
    {
      Request r({4, 5});
      r.max_tokens = 100000;
      auto b = engine.submit(r);
      REQUIRE(b.ok());
      dropped_id = b.handle.id();
    }  // dropped unread: cancelled
    auto c = engine.submit(Request({3}));
    REQUIRE(c.ok());
    detached_id = c.handle.id();
    c.handle.detach();  // runs to the end with nobody reading
    engine.shutdown(std::chrono::seconds(60));
  }
  std::lock_guard lock(mu);
  CHECK(seen.size() == 3);
  CHECK(seen[read_id] == std::vector<FinishReason>{FinishReason::length});
  REQUIRE(seen[dropped_id].size() == 1);
  CHECK((seen[dropped_id][0] == FinishReason::cancelled || seen[dropped_id][0] == FinishReason::length));
  CHECK(seen[detached_id] == std::vector<FinishReason>{FinishReason::length});
}

TEST_CASE("engine: failures stay with the requests that cause them", "[engine]") {
  FakeModel model(64);
  model.reject_token = 50;
  model.crash_token = 51;
  model.nan_token = 52;
  FakeModel reference(64);
  // All requests must share one batch: gate the engine until everything is queued.
  GatedModel gated(model);
  Engine engine(gated, small_config(256, 4, 16, 512), kernels::cpu::make_cpu_sampler());
  const std::vector<kernels::LogitBias> no_faults = {{50, -100.0f}, {51, -100.0f}, {52, -100.0f}};
  gated.close();
  Request warm_req({1});
  warm_req.sampling.logit_bias = no_faults;
  auto warm = engine.submit(warm_req);
  REQUIRE(gated.wait_entered(1));
  std::mt19937 rng(5);
  std::vector<Request> good;
  std::vector<RequestHandle> good_h;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> p = random_prompt(rng, 5 + i, 48);
    Request r(p);
    r.max_tokens = 6;
    r.sampling.temperature = 0;
    r.sampling.logit_bias = no_faults;  // never generate the fault tokens themselves
    auto s = engine.submit(r);
    REQUIRE(s.ok());
    good.push_back(r);
    good_h.push_back(std::move(s.handle));
  }
  Request rejected({1, 2, 50, 3});
  rejected.sampling.temperature = 0;
  auto hr = engine.submit(rejected);
  Request nan({3, 52});
  auto hn = engine.submit(nan);
  REQUIRE(hr.ok());
  REQUIRE(hn.ok());
  gated.open();

  // The rejected prompt fails alone; the others in its batch complete correctly.
  Outcome orj = collect(hr.handle);
  CHECK(orj.finish == FinishReason::error);
  CHECK(orj.last.error.find("rejected") != std::string::npos);
  Outcome on = collect(hn.handle);
  CHECK(on.finish == FinishReason::error);
  CHECK(on.last.error.find("finite") != std::string::npos);
  for (size_t i = 0; i < good.size(); ++i) {
    Outcome o = collect(good_h[i]);
    CHECK(o.finish == FinishReason::length);
    CHECK(o.tokens == reference.reference_tokens(*good[i].prompt, 6, {}, 1 << 20, good[i].sampling, 0));
  }
  collect(warm.handle);

  // A crash mid-step fails that step's requests; the engine keeps serving.
  auto crash = engine.submit(Request({4, 51, 4}));
  REQUIRE(crash.ok());
  Outcome oc = collect(crash.handle);
  CHECK(oc.finish == FinishReason::error);
  CHECK(oc.last.error.find("crashed") != std::string::npos);
  Request after({9, 9, 9});
  after.sampling.temperature = 0;
  after.sampling.logit_bias = no_faults;
  after.max_tokens = 4;
  auto ha = engine.submit(after);
  REQUIRE(ha.ok());
  Outcome oa = collect(ha.handle);
  CHECK(oa.finish == FinishReason::length);
  CHECK(oa.tokens == reference.reference_tokens({9, 9, 9}, 4, {}, 1 << 20, after.sampling, 0));

  check_pools_free(engine);
  const EngineStats s = engine.stats();
  CHECK(s.requests_failed_total == 3);
  CHECK(s.forward_errors_total >= 2);
  CHECK(model.violations() == 0);
}

TEST_CASE("engine: preemption by recompute keeps outputs exact", "[engine]") {
  FakeModel model(64);
  // 24 blocks of 4 tokens for 10 requests of up to 50 tokens each.
  EngineConfig cfg = small_config(24, 4, 10, 64);
  cfg.max_ctx = 96;
  Engine engine(model, cfg, kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(9);
  std::vector<Request> reqs;
  std::vector<RequestHandle> hs;
  for (int i = 0; i < 10; ++i) {
    Request r(random_prompt(rng, 10 + 3 * i, 64));
    r.max_tokens = 20;
    r.ignore_eos = true;
    if (i % 2) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 20;
      r.sampling.seed = 100 + static_cast<uint64_t>(i);
    } else {
      r.sampling.temperature = 0;
    }
    auto s = engine.submit(r);
    REQUIRE(s.ok());
    reqs.push_back(r);
    hs.push_back(std::move(s.handle));
  }
  int64_t preempted_requests = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    Outcome o = collect(hs[i]);
    const uint64_t seed = reqs[i].sampling.seed.value_or(0);
    CHECK(o.tokens == model.reference_tokens(*reqs[i].prompt, 20, {}, 96, reqs[i].sampling, seed));
    preempted_requests += o.last.metrics.preemptions > 0;
  }
  CHECK(engine.stats().preemptions_total > 0);
  CHECK(preempted_requests > 0);
  check_pools_free(engine);
  CHECK(model.violations() == 0);
}

TEST_CASE("engine: randomized stress with arrivals, cancels and small pools", "[engine][stress]") {
  std::mt19937 meta(77);
  int64_t total_iterations = 0, total_preemptions = 0, total_drafts = 0;
  for (int round = 0; round < 10; ++round) {
    FakeModel model(48, {47});
    const int32_t block_size = 1 << std::uniform_int_distribution<int>(0, 4)(meta);
    const int64_t max_ctx = std::uniform_int_distribution<int64_t>(16, 120)(meta);
    const int32_t min_blocks = static_cast<int32_t>((max_ctx + block_size - 1) / block_size);
    EngineConfig cfg = small_config(min_blocks + std::uniform_int_distribution<int32_t>(0, min_blocks)(meta),
                                    block_size, std::uniform_int_distribution<int32_t>(1, 12)(meta),
                                    std::uniform_int_distribution<int64_t>(1, 80)(meta));
    cfg.max_ctx = max_ctx;
    cfg.num_slots = std::uniform_int_distribution<int32_t>(1, cfg.scheduler.max_num_seqs)(meta);
    if (round % 3) {  // speculative decoding, its spare slots competing with admissions
      cfg.speculative.method = round % 3 == 1 ? "ngram" : "replay";
      cfg.speculative.num_speculative_tokens = std::uniform_int_distribution<int32_t>(1, 4)(meta);
      cfg.num_slots += std::uniform_int_distribution<int32_t>(0, 2 * cfg.scheduler.max_num_seqs)(meta);
    }
    Engine engine(model, cfg, kernels::cpu::make_cpu_sampler(),
                  cfg.speculative.method == "replay" ? std::make_unique<bench::ReplayDrafter>(48, 0.7, 0) : nullptr);
    INFO("round " << round << " block_size " << block_size << " blocks " << cfg.num_blocks << " slots "
                  << cfg.num_slots << " max_seqs " << cfg.scheduler.max_num_seqs << " budget "
                  << cfg.scheduler.max_num_batched_tokens << " max_ctx " << max_ctx << " speculative "
                  << cfg.speculative.method << " " << cfg.speculative.num_speculative_tokens);

    // Two submitting threads with random gaps; a third cancels at random.
    const int per_thread = 60;
    struct Sent {
      Request req;
      RequestHandle handle;
    };
    std::vector<Sent> sent[2];
    std::vector<RequestId> ids;
    std::mutex ids_mu;
    std::atomic<bool> done{false};
    std::atomic<int> refused{0};
    auto submitter = [&](int t) {
      std::mt19937 rng(1000 * round + t);
      for (int i = 0; i < per_thread; ++i) {
        Request r(random_prompt(rng, std::uniform_int_distribution<int64_t>(1, max_ctx)(rng), 47));
        r.max_tokens = std::uniform_int_distribution<int64_t>(1, 30)(rng);
        r.ignore_eos = rng() % 4 == 0;
        if (rng() % 3 == 0) r.stop_token_ids = {static_cast<int32_t>(rng() % 47)};
        if (rng() % 2) {
          r.sampling.temperature = 0;
        } else {
          r.sampling.temperature = 0.8f;
          r.sampling.top_p = 0.9f;
          r.sampling.seed = rng();
        }
        auto s = engine.submit(r);
        if (!s.ok()) {
          ++refused;
          continue;
        }
        {
          std::lock_guard lock(ids_mu);
          ids.push_back(s.handle.id());
        }
        sent[t].push_back({r, std::move(s.handle)});
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 400));
      }
    };
    std::thread canceller([&] {
      std::mt19937 rng(round);
      while (!done) {
        std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 800));
        std::lock_guard lock(ids_mu);
        if (!ids.empty() && rng() % 3 == 0) engine.cancel(ids[rng() % ids.size()]);
      }
    });
    std::thread t0(submitter, 0), t1(submitter, 1);
    t0.join();
    t1.join();
    REQUIRE(refused == 0);

    int cancelled = 0;
    for (auto& list : sent) {
      for (Sent& s : list) {
        Outcome o = collect(s.handle, std::chrono::seconds(120));
        REQUIRE(o.finals == 1);  // each request ends exactly once
        REQUIRE(o.finish);
        if (*o.finish == FinishReason::cancelled) {
          ++cancelled;
          continue;
        }
        REQUIRE(*o.finish != FinishReason::error);
        // Not cancelled: exactly the tokens the request produces alone.
        const auto want = model.reference_tokens(*s.req.prompt, s.req.max_tokens, stop_ids_for(model, s.req),
                                                 max_ctx, s.req.sampling, s.req.sampling.seed.value_or(0));
        REQUIRE(o.tokens == want);
      }
    }
    done = true;
    canceller.join();
    check_pools_free(engine);
    const EngineStats st = engine.stats();
    CHECK(st.requests_submitted_total == 2 * per_thread);
    CHECK(st.requests_cancelled_total == cancelled);
    CHECK(model.violations() == 0);
    total_iterations += st.iterations_total;
    total_preemptions += st.preemptions_total;
    total_drafts += st.spec_decode_drafts_total;
  }
  // The run is only a stress test if it ran long and under memory pressure.
  CHECK(total_iterations > 2000);
  CHECK(total_preemptions > 0);
  CHECK(total_drafts > 0);
  WARN("stress: " << total_iterations << " iterations, " << total_preemptions << " preemptions, " << total_drafts
                  << " verify chunks");
}
