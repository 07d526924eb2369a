// Speculative decoding on the checking FakeModel: with every drafter and K = 1..4 the engine's
// output is bit-identical to decoding without speculation (greedy, and seeded sampling too:
// each verified row draws as the corresponding plain decode step would), in mixed batches, under
// preemption, with stops and length limits inside the accepted tokens, cancellation, and n > 1;
// the sampled distribution passes a chi-square test against the target's; no block or slot
// leaks (engine invariants on). The FakeModel checks every step that a sequence continuing
// from a row-state slot after a partial acceptance has exactly the state of its accepted tokens.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "engine_checks.h"
#include "fake_model.h"
#include "scheduler/engine.h"
#include "programs/bench_drafters/replay_drafter.h"
#include "programs/bench_drafters/simulated_drafter.h"
#include "programs/bench_drafters/simulated_verdict.h"
#include "scheduler/ngram_drafter.h"

using namespace ds;
using namespace ds::scheduler;
using ds::test::check_pools_free;
using ds::test::collect;
using ds::test::run_together;
using ds::test::FakeModel;
using ds::test::Outcome;

namespace {

EngineConfig config(SpeculativeConfig spec, int32_t blocks = 256, int32_t block_size = 4, int32_t max_seqs = 8,
                    int64_t budget = 64) {
  EngineConfig c = ds::test::fake_engine_config(blocks, block_size, max_seqs, budget);
  c.speculative = std::move(spec);
  return c;
}

SpeculativeConfig spec(const std::string& method, int32_t k) {
  SpeculativeConfig s;
  s.method = method;
  s.num_speculative_tokens = k;
  return s;
}

// An engine over `model` speculating as cfg.speculative.method says: the engine's own drafter
// (ngram), or the benchmarks' controlled acceptance handed to it (programs/bench_drafters):
// replay's drafts spoiled at 1 - acceptance, or simulate's verdict at acceptance.
struct Speculating {
  bench::SimulatedVerdict verdict;  // declared first: it outlives the engine
  std::unique_ptr<Engine> engine;
  Engine& operator*() { return *engine; }
};

Speculating speculating(ForwardModel& model, const EngineConfig& cfg, double acceptance = 1.0) {
  Speculating s;
  const std::string& method = cfg.speculative.method;
  if (method == "replay") {
    s.engine = std::make_unique<Engine>(model, cfg, kernels::cpu::make_cpu_sampler(),
                                        std::make_unique<bench::ReplayDrafter>(model.vocab_size(), acceptance, 7));
  } else if (method == "simulate") {
    s.verdict = bench::simulated_verdict(model, kernels::cpu::make_cpu_sampler(), acceptance, 7);
    s.engine = std::make_unique<Engine>(*s.verdict.model, cfg, std::move(s.verdict.sampler),
                                        std::make_unique<bench::SimulatedDrafter>(7));
  } else {
    s.engine = std::make_unique<Engine>(model, cfg, kernels::cpu::make_cpu_sampler());
  }
  return s;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int64_t len, int32_t vocab) {
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = d(rng);
  return p;
}

// n requests that run to their length: random prompts, greedy unless `sampled` says otherwise.
std::vector<Request> length_requests(std::mt19937& rng, int n, int32_t vocab, const std::function<int64_t(int)>& prompt_len,
                                     const std::function<int64_t(int)>& max_tokens,
                                     const std::function<bool(int)>& sampled = [](int) { return false; }) {
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r(random_prompt(rng, prompt_len(i), vocab));
    r.max_tokens = max_tokens(i);
    r.ignore_eos = true;
    r.sampling.temperature = sampled(i) ? 0.8f : 0.0f;
    r.sampling.seed = 40 + static_cast<uint64_t>(i);
    out.push_back(r);
  }
  return out;
}

// The outputs without speculation.
std::vector<Outcome> plain_outputs(FakeModel& model, const std::vector<Request>& reqs) {
  Engine engine(model, config({}), kernels::cpu::make_cpu_sampler());
  return run_together(engine, reqs);
}

// A mixed set: greedy and seeded sampled requests (penalties on some), logprobs, stop ids,
// repeated prompts (n > 1), prompts with repetitions (something for ngram to find).
std::vector<Request> mixed_requests(int32_t vocab, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<Request> out;
  for (int i = 0; i < 10; ++i) {
    std::vector<int32_t> prompt = random_prompt(rng, 3 + 5 * (i % 4), vocab);
    if (i % 3 == 0) {
      const std::vector<int32_t> copy = prompt;
      for (int r = 0; r < 3; ++r) prompt.insert(prompt.end(), copy.begin(), copy.end());
    }
    Request r(prompt);
    r.max_tokens = 6 + 5 * (i % 5);
    r.ignore_eos = i % 4 != 1;
    if (i % 5 == 2) r.stop_token_ids = {static_cast<int32_t>(rng() % vocab)};
    if (i % 2 == 0) {
      r.sampling.temperature = 0;
    } else {
      r.sampling.temperature = 0.9f;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = 100 + static_cast<uint64_t>(i);
      if (i % 3 == 1) r.sampling.frequency_penalty = 0.7f, r.sampling.repetition_penalty = 1.2f;
    }
    r.sampling.logprobs = i % 3 == 0;
    r.sampling.top_logprobs = i % 3 == 0 ? 2 : 0;
    out.push_back(r);
    if (i % 4 == 3) {  // n = 2: the same prompt again with its own seed
      Request twin = r;
      twin.sampling.seed = 900 + static_cast<uint64_t>(i);
      out.push_back(twin);
    }
  }
  return out;
}

// Same tokens, logprobs, top logprobs and finish as the run without speculation.
void check_same(const std::vector<Outcome>& got, const std::vector<Outcome>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("request " << i);
    CHECK(got[i].tokens == want[i].tokens);
    CHECK(got[i].finish == want[i].finish);
    CHECK(got[i].finals == 1);
    REQUIRE(got[i].events.size() == want[i].events.size());
    for (size_t e = 0; e < got[i].events.size(); ++e) {
      CHECK(got[i].events[e].logprob == want[i].events[e].logprob);
      CHECK(got[i].events[e].top_logprobs == want[i].events[e].top_logprobs);
      CHECK(got[i].events[e].stop_token == want[i].events[e].stop_token);
    }
  }
}

}  // namespace

TEST_CASE("speculative: ngram drafts follow the latest match and continue a loop", "[speculative]") {
  NgramDrafter d(1, 3);
  std::vector<int32_t> out;
  const std::vector<int32_t> t = {5, 1, 2, 3, 9, 1, 2, 3, 4, 7, 1, 2};
  d.propose(1, t, 3, 4, out);
  CHECK(out == std::vector<int32_t>{3, 4, 7, 1});  // [1 2] last seen before "3 4 7 1 2"
  const std::vector<int32_t> loop = {8, 6, 4, 6, 4};
  d.propose(1, loop, 1, 5, out);
  CHECK(out == std::vector<int32_t>{6, 4, 6, 4, 6});  // [6 4] at 1..2, then the period
  d.propose(1, std::vector<int32_t>{1, 2, 3}, 3, 4, out);
  CHECK(out.empty());  // no earlier occurrence
  NgramDrafter two(2, 2);
  two.propose(1, std::vector<int32_t>{4, 1, 5, 3, 1}, 5, 2, out);
  CHECK(out.empty());  // a one-token match is below prompt_lookup_min
}

TEST_CASE("speculative: replay proposes a completed request's continuation at the set rate", "[speculative]") {
  const std::vector<int32_t> done = {1, 2, 3, 10, 11, 12, 13, 14, 15};
  std::vector<int32_t> out;
  bench::ReplayDrafter exact(64, 1.0, 1);
  exact.propose(1, std::vector<int32_t>{1, 2, 3}, 3, 4, out);
  CHECK(out.empty());  // nothing recorded yet
  exact.finished(1, done, 3, true);
  exact.finished(2, std::vector<int32_t>{7, 7, 7, 1}, 3, false);  // cancelled: not recorded
  exact.propose(3, std::vector<int32_t>{1, 2, 3, 10}, 3, 3, out);
  CHECK(out == std::vector<int32_t>{11, 12, 13});
  exact.propose(3, std::vector<int32_t>{1, 2, 3, 10, 11, 12, 13, 14}, 3, 3, out);
  CHECK(out == std::vector<int32_t>{15});  // to the end of the record
  exact.propose(4, std::vector<int32_t>{1, 2, 3, 10, 99}, 3, 3, out);
  CHECK(out.empty());  // departed from the record
  exact.propose(4, std::vector<int32_t>{1, 2, 3, 10, 99, 12}, 3, 3, out);
  CHECK(out.empty());  // and stays without drafts
  exact.propose(5, std::vector<int32_t>{7, 7, 7}, 3, 3, out);
  CHECK(out.empty());

  bench::ReplayDrafter half(64, 0.5, 2);
  std::vector<int32_t> record = {0};
  for (int i = 0; i < 4000; ++i) record.push_back(i % 64);
  half.finished(1, record, 1, true);
  int64_t same = 0, total = 0;
  for (int64_t len = 1; len + 8 <= static_cast<int64_t>(record.size()); len += 8) {
    half.propose(2, std::span<const int32_t>(record).first(static_cast<size_t>(len)), 1, 8, out);
    REQUIRE(out.size() == 8);
    for (size_t i = 0; i < 8; ++i) same += out[i] == record[static_cast<size_t>(len) + i], ++total;
  }
  CHECK(std::abs(static_cast<double>(same) / static_cast<double>(total) - 0.5) < 0.05);
}

TEST_CASE("speculative: every method and K is bit-identical to plain decoding", "[speculative]") {
  const int32_t vocab = 12;  // small: ngram matches and chance acceptances are frequent
  FakeModel model(vocab, {11});
  const std::vector<Request> reqs = mixed_requests(vocab, 3);
  std::vector<Outcome> plain;
  {
    Engine engine(model, config({}), kernels::cpu::make_cpu_sampler());
    plain = run_together(engine, reqs);
    check_pools_free(engine);
  }
  for (const Request& r : reqs) REQUIRE_FALSE(r.prompt->empty());
  for (const std::string method : {"ngram", "replay"}) {
    for (int32_t k = 1; k <= 4; ++k) {
      for (double a : method == std::string("replay") ? std::vector<double>{1.0, 0.6} : std::vector<double>{1.0}) {
        INFO(method << " K=" << k << " acceptance " << a);
        Speculating sp = speculating(model, config(spec(method, k)), a);
        Engine& engine = *sp;
        if (method == std::string("replay")) run_together(engine, reqs);  // warms the record
        check_same(run_together(engine, reqs), plain);
        check_pools_free(engine);
        const EngineStats st = engine.stats();
        CHECK(st.spec_decode_drafts_total > 0);
        CHECK(st.spec_decode_accepted_tokens_total > 0);
        CHECK(st.spec_decode_accepted_tokens_total <= st.spec_decode_draft_tokens_total);
        REQUIRE(st.spec_decode_accepted_per_position.size() == static_cast<size_t>(k));
        int64_t per_pos = 0;
        for (size_t i = 0; i < st.spec_decode_accepted_per_position.size(); ++i) {
          per_pos += st.spec_decode_accepted_per_position[i];
          if (i > 0) CHECK(st.spec_decode_accepted_per_position[i] <= st.spec_decode_accepted_per_position[i - 1]);
        }
        CHECK(per_pos == st.spec_decode_accepted_tokens_total);
        if (method == std::string("replay") && a == 1.0) {
          // Greedy replays are accepted whole: every draft of a greedy request is right.
          CHECK(st.spec_decode_accepted_tokens_total * 4 > st.spec_decode_draft_tokens_total);
        }
      }
    }
  }
  CHECK(model.violations() == 0);
}

TEST_CASE("speculative: a simulated verdict keeps drafts at the set rate whatever the model samples", "[speculative]") {
  const int32_t vocab = 64;
  FakeModel model(vocab);
  std::mt19937 rng(11);
  const std::vector<Request> reqs = length_requests(
      rng, 6, vocab, [](int i) { return 4 + 3 * i; }, [](int) { return 120; }, [](int i) { return i % 2 == 1; });
  const std::vector<Outcome> plain = plain_outputs(model, reqs);
  SECTION("acceptance 0 keeps nothing the model did not sample: its own output") {
    Speculating sp = speculating(model, config(spec("simulate", 3)), 0.0);
    Engine& engine = *sp;
    check_same(run_together(engine, reqs), plain);
    check_pools_free(engine);
    CHECK(engine.stats().spec_decode_draft_tokens_total > 0);
    // Only drafts the model's own samples reproduce (a prompt token it happened to pick).
    CHECK(engine.stats().spec_decode_accepted_tokens_total * 4 < engine.stats().spec_decode_draft_tokens_total);
  }
  SECTION("acceptance 1 keeps every draft, drawn from the prompt") {
    Speculating sp = speculating(model, config(spec("simulate", 3)), 1.0);
    Engine& engine = *sp;
    const std::vector<Outcome> out = run_together(engine, reqs);
    check_pools_free(engine);
    const EngineStats st = engine.stats();
    CHECK(st.spec_decode_accepted_tokens_total == st.spec_decode_draft_tokens_total);
    // 1 + 3 tokens per step: about a quarter of the steps plain decoding takes.
    CHECK(st.spec_decode_drafts_total <= 6 * (120 / 4 + 1));
    for (size_t i = 0; i < reqs.size(); ++i) {
      INFO("request " << i);
      CHECK(out[i].tokens.size() == 120);
      CHECK(out[i].tokens != plain[i].tokens);
      // Every 4th token is a kept draft, taken from the prompt.
      for (size_t t = 0; t + 1 < 117; t += 4)
        CHECK(std::find(reqs[i].prompt->begin(), reqs[i].prompt->end(), out[i].tokens[t + 1]) != reqs[i].prompt->end());
    }
  }
  SECTION("acceptance 0.6: the i-th draft is kept with probability 0.6^i") {
    // Which steps draw which verdicts depends on how the engine thread batches the requests,
    // so the rates are checked statistically: ~1,300 verify steps put 0.06 at > 4 standard
    // deviations of position 0's rate.
    const std::vector<Request> long_reqs = length_requests(rng, 6, vocab, [](int) { return 8; }, [](int) { return 500; });
    Speculating sp = speculating(model, config(spec("simulate", 4), 1024), 0.6);
    Engine& engine = *sp;
    run_together(engine, long_reqs);
    check_pools_free(engine);
    const EngineStats st = engine.stats();
    REQUIRE(st.spec_decode_accepted_per_position.size() == 4);
    const auto drafts = static_cast<double>(st.spec_decode_drafts_total);
    REQUIRE(drafts > 1000);
    for (size_t i = 0; i < 4; ++i) {
      INFO("position " << i);
      CHECK(std::abs(static_cast<double>(st.spec_decode_accepted_per_position[i]) / drafts -
                     std::pow(0.6, static_cast<double>(i + 1))) < 0.06);
    }
  }
  // The kept drafts went into the K/V and state like any accepted tokens.
  CHECK(model.violations() == 0);
}

TEST_CASE("speculative: disable_by_batch_size drafts only while few sequences run", "[speculative]") {
  const int32_t vocab = 64;
  FakeModel model(vocab);
  std::mt19937 rng(21);
  // Staggered lengths: 3, then 2, then 1 sequence running.
  const std::vector<Request> reqs = length_requests(rng, 3, vocab, [](int) { return 6; }, [](int i) { return 12 + 24 * i; });
  const std::vector<Outcome> plain = plain_outputs(model, reqs);
  auto drafted = [&](int32_t limit) {
    SpeculativeConfig sc = spec("simulate", 2);  // acceptance 0: plain output, drafts counted
    sc.disable_by_batch_size = limit;
    Speculating sp = speculating(model, config(sc), 0.0);
    Engine& engine = *sp;
    // The first step (request 0's prefill) waits until all three are queued, so the counts
    // below do not depend on how fast this thread submits under load.
    std::atomic<bool> queued{false};
    model.on_forward = [&] { while (!queued.load()) std::this_thread::yield(); };
    std::vector<scheduler::RequestHandle> hs;
    for (const Request& r : reqs) {
      auto s = engine.submit(r);
      REQUIRE(s.ok());
      hs.push_back(std::move(s.handle));
    }
    queued = true;
    std::vector<Outcome> out;
    for (auto& h : hs) out.push_back(collect(h));
    model.on_forward = nullptr;
    check_same(out, plain);
    check_pools_free(engine);
    return engine.stats().spec_decode_drafts_total;
  };
  const int64_t always = drafted(0), up_to_two = drafted(2), alone = drafted(1);
  // Verify steps per sequence: ~max_tokens each when always; request 0 never drafts alongside
  // two others, and only the last request drafts alone.
  // ~105 verify steps when always; ~70 with two at most (the last two after the first
  // finished); ~24 alone (the last one's).
  CHECK(always > up_to_two + 20);
  CHECK(alone > 0);
  CHECK(alone < up_to_two / 2);
  CHECK(model.violations() == 0);
}

TEST_CASE("speculative: stops and length limits inside the accepted tokens", "[speculative]") {
  const int32_t vocab = 64;
  FakeModel model(vocab);
  std::mt19937 rng(5);
  std::vector<Request> first;
  for (int i = 0; i < 6; ++i) {
    Request r(random_prompt(rng, 5 + i, vocab));
    r.max_tokens = 30;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    first.push_back(r);
  }
  Speculating sp = speculating(model, config(spec("replay", 4)));
  Engine& engine = *sp;
  const std::vector<Outcome> recorded = run_together(engine, first);
  // Again, now ending early: at a stop token from the middle of the recorded output (the drafts
  // run past it), or at a max_tokens / max_ctx that falls inside a verify step.
  std::vector<Request> second = first;
  for (size_t i = 0; i < second.size(); ++i) {
    if (i % 3 == 0) second[i].stop_token_ids = {recorded[i].tokens[7 + i]};
    if (i % 3 == 1) second[i].max_tokens = 9 + static_cast<int64_t>(i);
  }
  const std::vector<Outcome> out = run_together(engine, second);
  for (size_t i = 0; i < second.size(); ++i) {
    INFO("request " << i);
    const auto want = model.reference_tokens(*second[i].prompt, second[i].max_tokens, second[i].stop_token_ids,
                                             1 << 20, second[i].sampling, 0);
    CHECK(out[i].tokens == want);
    if (i % 3 == 0) {
      CHECK(out[i].finish == FinishReason::stop);
      CHECK(out[i].last.stop_token == second[i].stop_token_ids[0]);
    } else {
      CHECK(out[i].finish == FinishReason::length);
    }
  }
  check_pools_free(engine);
  CHECK(engine.stats().spec_decode_accepted_tokens_total > 0);

  // max_ctx: a request that reaches the context limit stops there with every method.
  EngineConfig tight = config(spec("replay", 3));
  tight.max_ctx = 20;
  Speculating sp_limited = speculating(model, tight);
  Engine& limited = *sp_limited;
  Request r(random_prompt(rng, 6, vocab));
  r.max_tokens = 100;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  run_together(limited, {r});
  const std::vector<Outcome> o = run_together(limited, {r});
  CHECK(o[0].tokens == model.reference_tokens(*r.prompt, 100, {}, 20, r.sampling, 0));
  CHECK(o[0].tokens.size() == 14);
  CHECK(o[0].finish == FinishReason::length);
  check_pools_free(limited);
  CHECK(model.violations() == 0);
}

TEST_CASE("speculative: preemption and slot pressure keep outputs exact and pools whole", "[speculative]") {
  const int32_t vocab = 16;
  FakeModel model(vocab);
  const std::vector<Request> reqs = [&] {
    std::vector<Request> v = mixed_requests(vocab, 11);
    for (Request& r : v) r.max_tokens = 24, r.ignore_eos = true, r.stop_token_ids.clear();
    return v;
  }();
  std::vector<Outcome> plain;
  {
    Engine engine(model, config({}, 256), kernels::cpu::make_cpu_sampler());
    plain = run_together(engine, reqs);
  }
  for (int32_t k : {2, 4}) {
    INFO("K=" << k);
    // Blocks for about three sequences at a time, and fewer state slots than running
    // sequences could draft with: drafts shrink, admissions take spare slots back.
    EngineConfig cfg = config(spec("replay", k), 36, 4, 6, 48);
    cfg.max_ctx = 96;
    cfg.num_slots = 8;
    Speculating sp = speculating(model, cfg, 0.8);
    Engine& engine = *sp;
    run_together(engine, reqs);
    const std::vector<Outcome> out = run_together(engine, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) CHECK(out[i].tokens == plain[i].tokens);
    const EngineStats st = engine.stats();
    CHECK(st.preemptions_total > 0);
    CHECK(st.spec_decode_accepted_tokens_total > 0);
    check_pools_free(engine);
  }
  CHECK(model.violations() == 0);
}

TEST_CASE("speculative: cancelling speculating requests frees their blocks and spare slots", "[speculative]") {
  FakeModel fake(4);  // every token occurs in the looping prompt: ngram drafts at every step
  test::GatedModel model(fake);
  Engine engine(model, config(spec("ngram", 3)), kernels::cpu::make_cpu_sampler());
  std::vector<int32_t> prompt;
  for (int i = 0; i < 4; ++i) prompt.insert(prompt.end(), {0, 1, 2, 3});
  Request r(prompt);
  r.max_tokens = 100000;
  r.ignore_eos = true;
  std::vector<RequestHandle> hs;
  const int n = model.entered();
  model.hold_at(n + 4);
  for (int i = 0; i < 3; ++i) {
    auto s = engine.submit(r);
    REQUIRE(s.ok());
    hs.push_back(std::move(s.handle));
  }
  REQUIRE(model.wait_entered(n + 4));
  CHECK(engine.stats().spec_decode_drafts_total > 0);
  for (auto& h : hs) h.cancel();
  model.open();
  for (auto& h : hs) {
    Outcome o = collect(h);
    CHECK(o.finish == FinishReason::cancelled);
    CHECK(o.finals == 1);
  }
  check_pools_free(engine);
  CHECK(fake.violations() == 0);
}

TEST_CASE("speculative: sampled outputs follow the target distribution (chi-square)", "[speculative]") {
  // Vocabulary of 6; a looping prompt so ngram always drafts; 4 tokens per request (the
  // first from the prefill, three from one verify step of K = 3 when accepted). The marginal
  // of each generated position is compared with the target's, computed exactly from the
  // model's logits by enumerating the earlier tokens.
  const int32_t vocab = 6;
  FakeModel model(vocab);
  const std::vector<int32_t> prompt = {1, 2, 3, 1, 2, 3, 1, 2};
  SamplingParams sp;
  sp.temperature = 1.5f;
  const int n_requests = 3000, n_tokens = 4;
  Engine engine(model, config(spec("ngram", 3), 4096, 4, 64, 4096), kernels::cpu::make_cpu_sampler());
  std::vector<Request> reqs;
  for (int i = 0; i < n_requests; ++i) {
    Request r(prompt);
    r.max_tokens = n_tokens;
    r.ignore_eos = true;
    r.sampling = sp;
    r.sampling.seed = 5000 + static_cast<uint64_t>(i);
    reqs.push_back(r);
  }
  std::vector<std::vector<int64_t>> counts(n_tokens, std::vector<int64_t>(vocab, 0));
  for (const Outcome& o : run_together(engine, reqs)) {
    REQUIRE(o.tokens.size() == static_cast<size_t>(n_tokens));
    for (int p = 0; p < n_tokens; ++p) ++counts[static_cast<size_t>(p)][static_cast<size_t>(o.tokens[static_cast<size_t>(p)])];
  }
  const EngineStats st = engine.stats();
  CHECK(st.spec_decode_accepted_tokens_total > 0);
  CHECK(st.spec_decode_accepted_tokens_total < st.spec_decode_draft_tokens_total);  // both paths taken

  // The target's distribution: softmax(logits / T) of every history, weighted by its probability.
  auto probs = [&](const std::vector<int32_t>& history) {
    std::vector<float> l = model.logits_after(history);
    std::vector<double> p(l.size());
    double m = -1e30, z = 0;
    for (float v : l) m = std::max(m, static_cast<double>(v) / sp.temperature);
    for (size_t v = 0; v < l.size(); ++v) z += p[v] = std::exp(l[v] / sp.temperature - m);
    for (double& v : p) v /= z;
    return p;
  };
  std::vector<std::vector<double>> want(n_tokens, std::vector<double>(vocab, 0.0));
  std::function<void(std::vector<int32_t>&, double, int)> walk = [&](std::vector<int32_t>& h, double w, int pos) {
    if (pos == n_tokens) return;
    const std::vector<double> p = probs(h);
    for (int32_t v = 0; v < vocab; ++v) {
      want[static_cast<size_t>(pos)][static_cast<size_t>(v)] += w * p[static_cast<size_t>(v)];
      h.push_back(v);
      walk(h, w * p[static_cast<size_t>(v)], pos + 1);
      h.pop_back();
    }
  };
  std::vector<int32_t> h = prompt;
  walk(h, 1.0, 0);
  // Chi-square per position, cells with an expected count under 5 pooled; p = 0.001 critical
  // values by degrees of freedom.
  const double critical[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52};
  for (int p = 0; p < n_tokens; ++p) {
    double chi = 0, pooled_e = 0, pooled_o = 0;
    int cells = 0;
    for (int32_t v = 0; v < vocab; ++v) {
      const double e = want[static_cast<size_t>(p)][static_cast<size_t>(v)] * n_requests;
      const double o = static_cast<double>(counts[static_cast<size_t>(p)][static_cast<size_t>(v)]);
      if (e < 5) {
        pooled_e += e, pooled_o += o;
        continue;
      }
      chi += (o - e) * (o - e) / e;
      ++cells;
    }
    if (pooled_e > 0) chi += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e, ++cells;
    INFO("position " << p << " chi-square " << chi << " over " << cells << " cells");
    REQUIRE(cells >= 2);
    CHECK(chi < critical[cells - 1]);
  }
  check_pools_free(engine);
  CHECK(model.violations() == 0);
}
