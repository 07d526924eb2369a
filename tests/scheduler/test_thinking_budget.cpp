// Thinking budgets (scheduler/thinking_budget.h) on the checking FakeModel: the tracker's
// phases alone, then the engine against an oracle that knows nothing of the tracker -- a
// budgeted greedy reply is the unbudgeted reply's first `budget` tokens, the close sequence,
// then what the model writes after exactly that history (teacher-forced) -- and speculative
// decoding (ngram, and replay drafts recorded from unbudgeted replies, so they think past the
// budget) reproducing plain budgeted decoding token for token, greedy and seeded sampling.
#include <catch2/catch.hpp>

#include <random>

#include "engine_checks.h"
#include "fake_model.h"
#include "programs/bench_drafters/replay_drafter.h"
#include "scheduler/engine.h"
#include "scheduler/thinking_budget.h"

using namespace ds;
using namespace ds::scheduler;
using ds::test::check_pools_free;
using ds::test::FakeModel;
using ds::test::Outcome;
using ds::test::run_together;

namespace {

constexpr int32_t kVocab = 512;
constexpr int32_t kOpen = 500, kClose = 501, kBreak = 502;

std::shared_ptr<const ThinkingSpec> spec(int64_t budget, bool starts_inside, int32_t open = kOpen) {
  auto s = std::make_shared<ThinkingSpec>();
  s->open_token = open;
  s->close_token = kClose;
  s->close_sequence = {kClose, kBreak};
  s->starts_inside = starts_inside;
  s->budget = budget;
  return s;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int64_t len) {
  std::uniform_int_distribution<int32_t> d(0, 499);  // no tag in the prompts
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = d(rng);
  return p;
}

EngineConfig config(const std::string& method = {}, int32_t k = 0) {
  EngineConfig c = ds::test::fake_engine_config(512, 4, 8, 64);
  if (!method.empty()) {
    c.speculative.method = method;
    c.speculative.num_speculative_tokens = k;
  }
  return c;
}

// The engine's own drafter, or the benchmarks' replay drafter (every record exact) handed to it.
std::unique_ptr<Drafter> drafter(const std::string& method) {
  return method == "replay" ? std::make_unique<bench::ReplayDrafter>(kVocab, 1.0, 5) : nullptr;
}

bool has_tag(std::span<const int32_t> t) {
  return std::any_of(t.begin(), t.end(), [](int32_t x) { return x >= kOpen && x <= kBreak; });
}

}  // namespace

TEST_CASE("thinking: the tracker counts and forces the close sequence of the reply's one block", "[thinking]") {
  ThinkingTracker t(spec(3, false));
  CHECK(t.phase() == ThinkingTracker::Phase::outside);
  t.accept(7);  // outside: not counted, never forced
  CHECK_FALSE(t.forced());
  t.accept(kOpen);
  for (int i = 0; i < 3; ++i) {
    CHECK_FALSE(t.forced());
    t.accept(10 + i);
  }
  CHECK(t.reasoning_tokens() == 3);
  REQUIRE(t.forced() == kClose);
  t.accept(kClose);
  CHECK(t.phase() == ThinkingTracker::Phase::closing);
  REQUIRE(t.forced() == kBreak);
  t.accept(kBreak);
  CHECK(t.phase() == ThinkingTracker::Phase::outside);
  CHECK_FALSE(t.forced());
  t.accept(11);
  // A <think> after the block closed is text, as the reasoning splitter reads it: never counted
  // nor closed by force.
  t.accept(kOpen);
  CHECK(t.phase() == ThinkingTracker::Phase::outside);
  CHECK_FALSE(t.forced());
  t.accept(12);
  t.accept(kClose);
  CHECK(t.reasoning_tokens() == 3);

  // Under a grammar only the first token may open the block: a later <think> is the grammar's
  // text (a JSON string's), and forcing </think> into it would break the constrained output.
  auto at_start = std::make_shared<ThinkingSpec>(*spec(0, false));
  at_start->opens_at_start_only = true;
  ThinkingTracker late(at_start);
  late.accept(7);
  late.accept(kOpen);
  CHECK(late.phase() == ThinkingTracker::Phase::outside);
  CHECK_FALSE(late.forced());
  ThinkingTracker first(at_start);
  first.accept(kOpen);
  CHECK(first.phase() == ThinkingTracker::Phase::thinking);
  CHECK(first.forced() == kClose);  // budget 0

  // The model closing by itself owes no close sequence.
  ThinkingTracker n(spec(10, true));
  n.accept(1);
  n.accept(kClose);
  CHECK(n.phase() == ThinkingTracker::Phase::outside);
  CHECK_FALSE(n.forced());
  CHECK(n.reasoning_tokens() == 1);

  // A token other than the close sequence's next (a grammar refused it) ends the close there.
  ThinkingTracker g(spec(0, true));
  CHECK(g.forced() == kClose);
  g.accept(kClose);
  g.accept(42);
  CHECK(g.phase() == ThinkingTracker::Phase::outside);
  CHECK_FALSE(g.forced());

  // No budget: counts only.
  ThinkingTracker u(spec(-1, true));
  for (int i = 0; i < 100; ++i) u.accept(3);
  CHECK_FALSE(u.forced());
  CHECK(u.reasoning_tokens() == 100);

  CHECK(spec(4, true)->validate(kVocab).empty());
  auto bad = std::make_shared<ThinkingSpec>(*spec(4, true));
  bad->close_sequence = {kBreak};
  CHECK_FALSE(bad->validate(kVocab).empty());
  bad->close_sequence = {kClose, kVocab};
  CHECK_FALSE(bad->validate(kVocab).empty());
}

TEST_CASE("thinking: a budgeted reply is the teacher-forced continuation after the close", "[thinking]") {
  FakeModel model(kVocab);
  Engine engine(model, config(), kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(11);
  const SamplingParams greedy = [] {
    SamplingParams p;
    p.temperature = 0;
    return p;
  }();
  int checked = 0;
  for (int trial = 0; trial < 40 && checked < 12; ++trial) {
    const std::vector<int32_t> prompt = random_prompt(rng, 3 + trial % 9);
    const int64_t budget = trial % 7;  // 0 included: closed at once
    const int64_t max_tokens = 24;
    const std::vector<int32_t> plain = model.reference_tokens(prompt, max_tokens, {}, 1 << 20, greedy, 0);
    if (has_tag(std::span<const int32_t>(plain).first(static_cast<size_t>(budget)))) continue;  // closed early
    std::vector<int32_t> expected(plain.begin(), plain.begin() + budget);
    expected.push_back(kClose);
    expected.push_back(kBreak);
    std::vector<int32_t> history = prompt;
    history.insert(history.end(), expected.begin(), expected.end());
    const auto after = model.reference_tokens(history, max_tokens - static_cast<int64_t>(expected.size()), {}, 1 << 20,
                                              greedy, 0);
    // Tags in `after` are text: a reply holds one block.
    expected.insert(expected.end(), after.begin(), after.end());

    Request r(prompt);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.sampling = greedy;
    r.thinking = spec(budget, true);
    const std::vector<Outcome> out = run_together(engine, {r});
    INFO("trial " << trial << " budget " << budget);
    CHECK(out[0].tokens == expected);
    ++checked;
  }
  CHECK(checked >= 8);
  check_pools_free(engine);
  CHECK(model.violations() == 0);
}

TEST_CASE("thinking: without a budget nothing changes; a reply opening its own block is limited", "[thinking]") {
  FakeModel model(kVocab);
  Engine engine(model, config(), kernels::cpu::make_cpu_sampler());
  std::mt19937 rng(3);
  std::vector<Request> plain, tracked;
  for (int i = 0; i < 6; ++i) {
    Request r(random_prompt(rng, 5 + i));
    r.max_tokens = 20;
    r.ignore_eos = true;
    r.sampling.temperature = i % 2 ? 0.9f : 0.0f;
    r.sampling.seed = 100 + static_cast<uint64_t>(i);
    plain.push_back(r);
    r.thinking = spec(-1, true);
    tracked.push_back(r);
  }
  const auto a = run_together(engine, plain);
  const auto b = run_together(engine, tracked);
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].tokens == b[i].tokens);

  // A reply that opens its own block: nothing is forced before the opening, the budget counts
  // from there. The opening tag is whichever token the unbudgeted reply writes third.
  const SamplingParams greedy = plain[0].sampling;
  int checked = 0;
  for (int trial = 0; trial < 30 && checked < 6; ++trial) {
    const std::vector<int32_t> prompt = random_prompt(rng, 4 + trial % 5);
    const std::vector<int32_t> free_run = model.reference_tokens(prompt, 20, {}, 1 << 20, greedy, 0);
    const int32_t open = free_run[2];
    if (free_run[0] == open || free_run[1] == open || has_tag(std::span<const int32_t>(free_run).first(6))) continue;
    const int64_t budget = 3;
    std::vector<int32_t> expected(free_run.begin(), free_run.begin() + 3 + budget);
    if (std::find(expected.begin() + 3, expected.end(), open) != expected.end()) continue;
    expected.push_back(kClose);
    expected.push_back(kBreak);
    std::vector<int32_t> history = prompt;
    history.insert(history.end(), expected.begin(), expected.end());
    const auto after = model.reference_tokens(history, 20 - static_cast<int64_t>(expected.size()), {}, 1 << 20, greedy, 0);
    if (has_tag(after) || std::find(after.begin(), after.end(), open) != after.end()) continue;
    expected.insert(expected.end(), after.begin(), after.end());
    Request r(prompt);
    r.max_tokens = 20;
    r.ignore_eos = true;
    r.sampling = greedy;
    r.thinking = spec(budget, false, open);
    INFO("trial " << trial);
    CHECK(run_together(engine, {r})[0].tokens == expected);
    ++checked;
  }
  CHECK(checked >= 3);
  check_pools_free(engine);
}

TEST_CASE("thinking: speculative decoding reproduces plain budgeted decoding", "[thinking][speculative]") {
  FakeModel model(kVocab);
  std::mt19937 rng(21);
  std::vector<Request> unbudgeted, budgeted;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> prompt = random_prompt(rng, 4 + i);
    // Repeats give the ngram drafter something to find.
    prompt.insert(prompt.end(), prompt.begin(), prompt.end());
    Request r(prompt);
    r.max_tokens = 30;
    r.ignore_eos = true;
    r.sampling.temperature = i % 3 == 2 ? 0.8f : 0.0f;
    r.sampling.seed = 7 + static_cast<uint64_t>(i);
    unbudgeted.push_back(r);
    r.thinking = spec(i % 4 + 1, true);
    budgeted.push_back(r);
  }
  std::vector<Outcome> plain;
  {
    Engine engine(model, config(), kernels::cpu::make_cpu_sampler());
    plain = run_together(engine, budgeted);
    check_pools_free(engine);
  }
  for (size_t i = 0; i < plain.size(); ++i) {
    ThinkingTracker t(budgeted[i].thinking);
    for (int32_t tok : plain[i].tokens) t.accept(tok);
    CHECK(t.reasoning_tokens() <= budgeted[i].thinking->budget);
  }
  for (const std::string method : {"ngram", "replay"}) {
    for (int32_t k = 1; k <= 4; ++k) {
      INFO(method << " K=" << k);
      Engine engine(model, config(method, k), kernels::cpu::make_cpu_sampler(), drafter(method));
      // Replay's records are the unbudgeted replies: their drafts keep thinking past the budget.
      if (method == std::string("replay")) run_together(engine, unbudgeted);
      const std::vector<Outcome> spec_out = run_together(engine, budgeted);
      for (size_t i = 0; i < plain.size(); ++i) CHECK(spec_out[i].tokens == plain[i].tokens);
      check_pools_free(engine);
      const EngineStats st = engine.stats();
      CHECK(st.spec_decode_drafts_total > 0);
      if (method == std::string("replay")) CHECK(st.spec_decode_accepted_tokens_total > 0);
    }
  }
  CHECK(model.violations() == 0);
}

TEST_CASE("thinking: the engine refuses a spec it cannot follow", "[thinking]") {
  FakeModel model(kVocab);
  Engine engine(model, config(), kernels::cpu::make_cpu_sampler());
  Request r(std::vector<int32_t>{1, 2, 3});
  auto s = std::make_shared<ThinkingSpec>(*spec(3, true));
  s->close_sequence = {kClose, kVocab + 5};
  r.thinking = s;
  const SubmitResult res = engine.submit(r);
  CHECK(res.status == SubmitStatus::invalid_request);
  CHECK(res.message.find("thinking") != std::string::npos);
}
