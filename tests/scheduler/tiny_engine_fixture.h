// The fixture of the engine's tests on the bundled tiny Qwen3.5 checkpoint (CPU backend, or
// DELTASERVE_TEST_BACKEND): the model loaded once per executable, HF's greedy reference, and
// helpers to run requests together or alone. DELTASERVE_TEST_MODEL names another fixture of
// tests/data with a reference of the same prompts (tiny-qwen35-gptq, -awq: the engine over
// 4-bit weights).
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine_checks.h"
#include "greedy_match.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/qwen35/model.h"
#include "model/qwen35/reference_file.h"
#include "programs/bench_drafters/replay_drafter.h"
#include "scheduler/engine.h"
#include "scheduler/qwen35_forward_model.h"
#include "tests/test_backend.h"
#include "tests/test_paths.h"

namespace ds::test {

using namespace ds::scheduler;

inline constexpr int kRefTokens = 24;  // greedy tokens per reference prompt

inline std::string test_model() {
  const char* v = std::getenv("DELTASERVE_TEST_MODEL");
  return v && *v ? std::string(v) : std::string("tiny-qwen35");
}

// The tiny model, loaded once for the whole executable (the engine thread is its only user
// while an engine runs; engines run one at a time).
struct Tiny {
  Tiny()
      : backend(test::make_test_backend()),  // DELTASERVE_TEST_BACKEND (tests/test_backend.h)
        model(qwen35::Model::load(*backend, test::data_path(test_model()))),
        forward(*model),
        ref(test::data_path(test_model() + "/reference.safetensors")) {
    for (int i = 0; i < ref.num_prompts(); ++i) {
      prompts.push_back(ref.ints("p" + std::to_string(i) + ".prompt"));
      greedy.push_back(ref.ints("p" + std::to_string(i) + ".greedy_tokens"));
    }
  }
  // Whether tokens (a greedy run of prompt i) are HF's greedy tokens (their first tokens.size()).
  // Whether tokens are prompt i's greedy reference tokens (greedy_match.h), compared over the
  // tokens' length.
  bool matches_greedy(const std::vector<int32_t>& tokens, size_t i) const {
    const std::vector<int32_t> want(greedy[i].begin(), greedy[i].begin() + static_cast<std::ptrdiff_t>(
                                                                           std::min(tokens.size(), greedy[i].size())));
    return follows_greedy(tokens, want, ref, "p" + std::to_string(i) + ".greedy_logits", "prompt " + std::to_string(i));
  }
  static bool same_run(const std::vector<int32_t>& a, const std::vector<int32_t>& b) { return same_greedy_run(a, b); }
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<qwen35::Model> model;
  Qwen35ForwardModel forward;
  qwen35::ReferenceFile ref;
  std::vector<std::vector<int32_t>> prompts;  // lengths 1, 5, 17, 63, 64, 65, 200, 511
  std::vector<std::vector<int32_t>> greedy;
};

inline Tiny& tiny() {
  static Tiny t;
  return t;
}

inline EngineConfig config(int32_t num_blocks, int64_t budget = 256, int32_t max_seqs = 16, int64_t max_ctx = 4096) {
  EngineConfig c;
  c.scheduler.max_num_seqs = max_seqs;
  c.scheduler.max_num_batched_tokens = budget;
  c.block_size = 16;
  c.num_blocks = num_blocks;
  c.max_ctx = max_ctx;
  c.check_invariants = true;
  // A device run can compare a failing case with recorded steps off (test-only switch).
  c.step_graphs = std::getenv("DELTASERVE_TEST_NO_STEP_GRAPHS") == nullptr;
  return c;
}

inline Request greedy_request(const std::vector<int32_t>& prompt, int64_t max_tokens = kRefTokens) {
  Request r(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;  // the reference continues past eos
  r.sampling.temperature = 0;
  return r;
}

inline std::vector<int32_t> random_prompt(std::mt19937& rng, int64_t len) {
  std::uniform_int_distribution<int32_t> d(0, 1023);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = d(rng);
  return p;
}

// The drafter a tiny engine test hands its engine for `method`: the benchmarks' replay drafter
// (acceptance 0.7; it replays what an earlier run of the same requests produced) for
// "replay", none (the engine's own) otherwise.
inline std::unique_ptr<Drafter> speculative_drafter(const std::string& method, int64_t vocab) {
  return method == "replay" ? std::make_unique<bench::ReplayDrafter>(vocab, 0.7, 3) : nullptr;
}

using ds::test::run_together;

// One request at a time: each alone in its batches.
inline std::vector<Outcome> run_alone(Engine& engine, const std::vector<Request>& reqs) {
  std::vector<Outcome> out;
  for (const Request& r : reqs) out.push_back(run_together(engine, {r})[0]);
  return out;
}

using ds::test::check_pools_free;

inline std::vector<Request> reference_requests() {
  std::vector<Request> reqs;
  for (const auto& p : tiny().prompts) reqs.push_back(greedy_request(p));
  return reqs;
}

// The speculative decoding tests' requests: the fixture prompts of 1 to 65 tokens (greedy,
// with a reference), a prompt that repeats itself (ngram finds it), and a seeded sampled
// request with its twin (n = 2), from index kSpeculativeSampled on.
inline constexpr size_t kSpeculativeSampled = 7;
inline std::vector<Request> speculative_requests() {
  Tiny& t = tiny();
  std::vector<Request> reqs;
  for (size_t i = 0; i < 6; ++i) reqs.push_back(greedy_request(t.prompts[i]));
  std::vector<int32_t> loop;
  for (int i = 0; i < 5; ++i) loop.insert(loop.end(), {11, 22, 33, 44, 55});
  reqs.push_back(greedy_request(loop, 16));
  Request sampled = greedy_request(t.prompts[2], 16);
  sampled.sampling.temperature = 0.8f;
  sampled.sampling.top_k = 40;
  sampled.sampling.seed = 17;
  sampled.sampling.logprobs = true;
  reqs.push_back(sampled);
  sampled.sampling.seed = 18;
  reqs.push_back(sampled);
  return reqs;
}

inline void check_speculative_outputs(const std::vector<Outcome>& got, const std::vector<Outcome>& plain) {
  Tiny& t = tiny();
  REQUIRE(got.size() == plain.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("request " << i);
    CHECK(got[i].finish == FinishReason::length);
    // On a GPU a verify chunk's rows go through other kernels than one-token decode steps (other
    // rounding), so a fixture prompt may leave plain decoding's tokens at one of the reference's
    // near-ties (H200, cuda-f32: prompt 1, step 18); there the reference decides. A seeded
    // sampled request's draws depend on the rounding of its logits too, which on a GPU follows
    // the batch its rows share (preemption and prefix caching's 16-aligned chunk ends change
    // those): a draw near a boundary of the distribution flips (H200: request 7's first token,
    // with step graphs on and off). So on a GPU only the greedy prompt without a reference is
    // compared with plain decoding; on the CPU every request's tokens are plain decoding's exactly.
    INFO("got " << ::Catch::Detail::stringify(got[i].tokens) << "\nplain " << ::Catch::Detail::stringify(plain[i].tokens));
    const bool on_cpu = test::test_backend_name() == "cpu";
    if (on_cpu || (i >= 6 && i < kSpeculativeSampled)) CHECK(Tiny::same_run(got[i].tokens, plain[i].tokens));
    if (i < 6) CHECK(t.matches_greedy(got[i].tokens, i));
  }
}

}  // namespace ds::test
