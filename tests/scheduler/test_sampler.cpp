// The host sampler against distributions computed by hand (and, for the large-vocabulary
// paths, against a brute-force full sort).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "kernels/cpu/sampler.h"
#include "scheduler/sampling_params.h"

using namespace ds::kernels;
using namespace ds::kernels::cpu;
using ds::scheduler::SamplingParams;

namespace {

std::vector<float> logs(std::vector<double> probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

std::map<int32_t, double> as_map(const std::vector<TokenProb>& d) {
  std::map<int32_t, double> m;
  for (const auto& t : d) m[t.token] = t.prob;
  return m;
}

std::map<int32_t, double> distribution(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<Candidate> scratch;
  std::vector<TokenProb> out;
  REQUIRE(filtered_distribution(logits, p, scratch, out));
  return as_map(out);
}

void check_distribution(const std::map<int32_t, double>& got, const std::map<int32_t, double>& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& [t, p] : want) {
    INFO("token " << t);
    REQUIRE(got.count(t) == 1);
    CHECK(got.at(t) == Approx(p).epsilon(1e-6));
  }
}

// One row through the full sampler.
SampledToken sample_one(const std::vector<float>& logits, const SamplingParams& p, uint64_t seed,
                        std::vector<int32_t> prompt = {}, std::vector<int32_t> generated = {}) {
  auto s = make_cpu_sampler();
  std::vector<float> copy = logits;
  Tensor t(nullptr, copy.data(), ds::DType::f32, Shape{1, static_cast<int64_t>(copy.size())});
  SamplerRng rng(seed);
  SampleRow row{&p, prompt, generated, &rng};
  SampledToken out;
  s->sample(t, std::span<const SampleRow>(&row, 1), std::span<SampledToken>(&out, 1));
  return out;
}

}  // namespace

TEST_CASE("greedy takes the first largest logit, after bias and penalties", "[sampler]") {
  SamplingParams p;
  p.temperature = 0;
  CHECK(sample_one({1.0f, 3.0f, 3.0f, -2.0f}, p, 1).token == 1);
  p.logit_bias = {{3, 10.0f}};
  CHECK(sample_one({1.0f, 3.0f, 3.0f, -2.0f}, p, 1).token == 3);
  // Repetition 2 on prompt token 1: 3 -> 1.5, so token 2 wins.
  SamplingParams r;
  r.temperature = 0;
  r.repetition_penalty = 2.0f;
  CHECK(sample_one({1.0f, 3.0f, 2.9f, -2.0f}, r, 1, {1}).token == 2);
  // top_k == 1 is greedy too.
  SamplingParams k;
  k.top_k = 1;
  CHECK(sample_one({0.5f, 0.1f, 4.0f}, k, 7).token == 2);
}

TEST_CASE("temperature scales the softmax", "[sampler]") {
  SamplingParams p;
  p.temperature = 0.5f;
  // softmax([2, 4, 6]) = e^{-4}, e^{-2}, 1 over their sum.
  const double a = std::exp(-4.0), b = std::exp(-2.0), c = 1.0, z = a + b + c;
  check_distribution(distribution({1, 2, 3}, p), {{0, a / z}, {1, b / z}, {2, c / z}});
  p.temperature = 2.0f;
  const double a2 = std::exp(-1.0), b2 = std::exp(-0.5), c2 = 1.0, z2 = a2 + b2 + c2;
  check_distribution(distribution({1, 2, 3}, p), {{0, a2 / z2}, {1, b2 / z2}, {2, c2 / z2}});
}

TEST_CASE("top_k, top_p and min_p keep what vLLM keeps", "[sampler]") {
  const std::vector<float> x = logs({0.05, 0.5, 0.15, 0.3});  // tokens 1 > 3 > 2 > 0
  SamplingParams p;
  SECTION("top_k 2") {
    p.top_k = 2;
    check_distribution(distribution(x, p), {{1, 0.5 / 0.8}, {3, 0.3 / 0.8}});
  }
  SECTION("top_k larger than the vocabulary keeps everything") {
    p.top_k = 10;
    check_distribution(distribution(x, p), {{0, 0.05}, {1, 0.5}, {2, 0.15}, {3, 0.3}});
  }
  SECTION("top_p 0.79 stops at the token that reaches it") {
    p.top_p = 0.79f;
    check_distribution(distribution(x, p), {{1, 0.5 / 0.8}, {3, 0.3 / 0.8}});
  }
  SECTION("top_p 0.81 needs the third token") {
    p.top_p = 0.81f;
    check_distribution(distribution(x, p), {{1, 0.5 / 0.95}, {3, 0.3 / 0.95}, {2, 0.15 / 0.95}});
  }
  SECTION("top_p after top_k renormalises within the k") {
    p.top_k = 3;         // {0.5, 0.3, 0.15} -> / 0.95
    p.top_p = 0.85f;     // 0.526 + 0.316 = 0.842 < 0.85 -> all three
    check_distribution(distribution(x, p), {{1, 0.5 / 0.95}, {3, 0.3 / 0.95}, {2, 0.15 / 0.95}});
    p.top_p = 0.84f;     // 0.842 >= 0.84 -> two
    check_distribution(distribution(x, p), {{1, 0.5 / 0.8}, {3, 0.3 / 0.8}});
  }
  SECTION("min_p is relative to the largest probability") {
    p.min_p = 0.35f;  // threshold 0.175: keeps 0.5 and 0.3
    check_distribution(distribution(x, p), {{1, 0.5 / 0.8}, {3, 0.3 / 0.8}});
    p.min_p = 0.25f;  // threshold 0.125: adds 0.15
    check_distribution(distribution(x, p), {{1, 0.5 / 0.95}, {3, 0.3 / 0.95}, {2, 0.15 / 0.95}});
  }
  SECTION("min_p sees the temperature-scaled distribution") {
    p.temperature = 2.0f;  // probs ∝ sqrt(p): 0.2236, 0.7071, 0.3873, 0.5477; max 0.7071
    p.min_p = 0.5f;        // keep sqrt(p) >= 0.3536: tokens 1, 2, 3
    const double s1 = std::sqrt(0.5), s2 = std::sqrt(0.15), s3 = std::sqrt(0.3), z = s1 + s2 + s3;
    check_distribution(distribution(x, p), {{1, s1 / z}, {2, s2 / z}, {3, s3 / z}});
  }
}

TEST_CASE("penalties follow the OpenAI / HF rules", "[sampler]") {
  PenaltyScratch scratch;
  SECTION("repetition divides positive and multiplies negative logits, once per distinct token") {
    SamplingParams p;
    p.repetition_penalty = 2.0f;
    std::vector<float> x = {2.0f, -1.0f, 0.5f, 3.0f};
    const std::vector<int32_t> prompt = {0, 1, 0, 0};
    const std::vector<int32_t> generated = {1, 2};
    apply_penalties(x, p, prompt, generated, scratch);
    CHECK(x == std::vector<float>{1.0f, -2.0f, 0.25f, 3.0f});
  }
  SECTION("frequency and presence count generated tokens only") {
    SamplingParams p;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 1.0f;
    std::vector<float> x = {0.0f, 0.0f, 0.0f, 0.0f};
    const std::vector<int32_t> prompt = {0, 0, 0};
    const std::vector<int32_t> generated = {2, 2, 3};
    apply_penalties(x, p, prompt, generated, scratch);
    CHECK(x == std::vector<float>{0.0f, 0.0f, -2.0f, -1.5f});
  }
  SECTION("logit_bias adds, repeated entries add up") {
    SamplingParams p;
    p.logit_bias = {{1, 1.5f}, {1, 0.5f}, {3, -4.0f}};
    std::vector<float> x = {0.0f, 1.0f, 2.0f, 3.0f};
    apply_logit_bias(x, p);
    CHECK(x == std::vector<float>{0.0f, 3.0f, 2.0f, -1.0f});
  }
  SECTION("the stamp array survives many calls") {
    SamplingParams p;
    p.repetition_penalty = 4.0f;
    for (int i = 0; i < 1000; ++i) {
      std::vector<float> x = {4.0f, 4.0f};
      const std::vector<int32_t> prompt = {i % 2};
      apply_penalties(x, p, prompt, {}, scratch);
      CHECK(x[static_cast<size_t>(i % 2)] == 1.0f);
      CHECK(x[static_cast<size_t>(1 - i % 2)] == 4.0f);
    }
  }
}

TEST_CASE("logprobs are the raw log-softmax, before temperature and penalties", "[sampler]") {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 2.0f};
  const double z = std::exp(1.0) + 2 * std::exp(2.0) + std::exp(3.0);
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = 3;
  p.logit_bias = {{0, 100.0f}};  // greedy picks 0, but its logprob is the raw one
  SampledToken s = sample_one(x, p, 1);
  REQUIRE(s.token == 0);
  CHECK(s.logprob == Approx(1.0 - std::log(z)).epsilon(1e-6));
  REQUIRE(s.top.size() == 3);
  CHECK(s.top[0].token == 2);
  CHECK(s.top[0].logprob == Approx(3.0 - std::log(z)).epsilon(1e-6));
  CHECK(s.top[1].token == 1);  // ties: lower token id first
  CHECK(s.top[2].token == 3);
  CHECK(s.top[2].logprob == Approx(2.0 - std::log(z)).epsilon(1e-6));

  p.logprobs = false;
  p.top_logprobs = 0;
  SampledToken q = sample_one(x, p, 1);
  CHECK(q.top.empty());
}

TEST_CASE("draws follow the distribution", "[sampler]") {
  const std::vector<TokenProb> d = {{5, 0.25}, {2, 0.5}, {9, 0.25}};
  CHECK(draw(d, 0.0) == 5);
  CHECK(draw(d, 0.2499) == 5);
  CHECK(draw(d, 0.25) == 2);
  CHECK(draw(d, 0.7499) == 2);
  CHECK(draw(d, 0.75) == 9);
  CHECK(draw(d, 0.9999999) == 9);

  // 40k seeded samples of {0.1, 0.2, 0.3, 0.4}: every frequency within 1.5% absolute
  // (over 6 standard deviations).
  const std::vector<float> x = logs({0.1, 0.2, 0.3, 0.4});
  SamplingParams p;
  auto s = make_cpu_sampler();
  std::vector<float> copy = x;
  Tensor t(nullptr, copy.data(), ds::DType::f32, Shape{1, 4});
  SamplerRng rng(12345);
  std::vector<int> counts(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    SampleRow row{&p, {}, {}, &rng};
    SampledToken out;
    s->sample(t, std::span<const SampleRow>(&row, 1), std::span<SampledToken>(&out, 1));
    REQUIRE(out.token >= 0);
    ++counts[static_cast<size_t>(out.token)];
  }
  for (int k = 0; k < 4; ++k) CHECK(std::abs(counts[static_cast<size_t>(k)] / double(n) - 0.1 * (k + 1)) < 0.015);
}

TEST_CASE("a seeded row samples the same tokens whatever else is in the batch", "[sampler]") {
  const int64_t vocab = 50;
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> mine(vocab);
  for (auto& v : mine) v = nd(gen);

  SamplingParams seeded;
  seeded.temperature = 1.3f;
  seeded.top_p = 0.95f;
  seeded.seed = 99;
  auto run = [&](int neighbours) {
    auto s = make_cpu_sampler();
    SamplerRng rng(99);
    std::vector<SamplerRng> others(static_cast<size_t>(neighbours), SamplerRng(7));
    SamplingParams other;
    other.temperature = 0.7f;
    std::vector<int32_t> got;
    for (int step = 0; step < 30; ++step) {
      std::vector<float> logits;
      std::vector<SampleRow> rows;
      for (int o = 0; o < neighbours; ++o) {
        for (int64_t v = 0; v < vocab; ++v) logits.push_back(nd(gen));
        rows.push_back({&other, {}, {}, &others[static_cast<size_t>(o)]});
      }
      logits.insert(logits.end(), mine.begin(), mine.end());
      rows.push_back({&seeded, {}, {}, &rng});
      Tensor t(nullptr, logits.data(), ds::DType::f32, Shape{static_cast<int64_t>(rows.size()), vocab});
      std::vector<SampledToken> out(rows.size());
      s->sample(t, rows, out);
      got.push_back(out.back().token);
    }
    return got;
  };
  const auto alone = run(0);
  CHECK(run(5) == alone);
  CHECK(run(17) == alone);
  CHECK(std::set<int32_t>(alone.begin(), alone.end()).size() > 3);  // it really samples
}

TEST_CASE("large-vocabulary selection agrees with a full sort", "[sampler]") {
  const int64_t vocab = 248320;
  std::mt19937 gen(11);
  auto brute = [&](const std::vector<float>& logits, const SamplingParams& p) {
    std::vector<std::pair<float, int32_t>> all;
    float m = -INFINITY;
    for (int64_t i = 0; i < vocab; ++i) m = std::max(m, logits[static_cast<size_t>(i)] / p.temperature);
    for (int64_t i = 0; i < vocab; ++i) all.push_back({logits[static_cast<size_t>(i)] / p.temperature, static_cast<int32_t>(i)});
    std::sort(all.begin(), all.end(), [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    if (p.top_k > 0 && all.size() > static_cast<size_t>(p.top_k)) all.resize(static_cast<size_t>(p.top_k));
    double z = 0;
    for (auto& e : all) z += std::exp(double(e.first) - m);
    size_t keep = all.size();
    if (p.top_p < 1) {
      double cum = 0;
      for (size_t j = 0; j < all.size(); ++j) {
        cum += std::exp(double(all[j].first) - m);
        if (cum >= p.top_p * z) {
          keep = j + 1;
          break;
        }
      }
    }
    all.resize(keep);
    double s = 0;
    for (auto& e : all) s += std::exp(double(e.first) - m);
    std::map<int32_t, double> out;
    for (auto& e : all) out[e.second] = std::exp(double(e.first) - m) / s;
    return out;
  };
  SECTION("peaked (the partial sort is enough)") {
    std::normal_distribution<float> nd(0.0f, 3.0f);
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (auto& v : logits) v = nd(gen);
    SamplingParams p;
    p.temperature = 0.7f;
    p.top_p = 0.9f;
    check_distribution(distribution(logits, p), brute(logits, p));
    p.top_k = 50;
    check_distribution(distribution(logits, p), brute(logits, p));
  }
  SECTION("nearly flat (the prefix has to grow)") {
    std::uniform_real_distribution<float> ud(0.0f, 0.01f);
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (auto& v : logits) v = ud(gen);
    SamplingParams p;
    p.top_p = 0.5f;
    auto got = distribution(logits, p);
    CHECK(got.size() > 100000);
    check_distribution(got, brute(logits, p));
  }
}

TEST_CASE("rows without a finite logit cannot be sampled", "[sampler]") {
  SamplingParams greedy;
  greedy.temperature = 0;
  SamplingParams random;
  CHECK(sample_one({1.0f, NAN, 2.0f}, greedy, 1).token == -1);
  CHECK(sample_one({1.0f, NAN, 2.0f}, random, 1).token == -1);
  CHECK(sample_one({-INFINITY, -INFINITY}, greedy, 1).token == -1);
  CHECK(sample_one({-INFINITY, -INFINITY}, random, 1).token == -1);
  CHECK(sample_one({-INFINITY, 0.0f}, random, 1).token == 1);
}

TEST_CASE("sampling parameters are validated with a message", "[sampler]") {
  SamplingParams p;
  CHECK(p.validate(10).empty());
  p.temperature = -1;
  CHECK(p.validate(10).find("temperature") != std::string::npos);
  p = {};
  p.top_p = 0;
  CHECK(p.validate(10).find("top_p") != std::string::npos);
  p = {};
  p.top_logprobs = 21;
  CHECK(p.validate(10).find("top_logprobs") != std::string::npos);
  p = {};
  p.logit_bias = {{10, 1.0f}};
  CHECK(p.validate(10).find("logit_bias") != std::string::npos);
  p = {};
  p.repetition_penalty = 0;
  CHECK(p.validate(10).find("repetition_penalty") != std::string::npos);
  p = {};
  p.min_p = 1.5f;
  CHECK(p.validate(10).find("min_p") != std::string::npos);
}

TEST_CASE("a token bitmask forbids tokens before anything else", "[sampler]") {
  // 70 tokens (three mask words, the last partial); only 5, 33 and 69 allowed.
  std::vector<float> logits(70, 0.0f);
  logits[10] = 9.0f;  // the favourite, forbidden
  logits[33] = 2.0f;
  logits[69] = 1.0f;
  std::vector<uint32_t> mask(3, 0u);
  for (int32_t t : {5, 33, 69}) mask[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
  std::vector<float> masked;
  apply_token_mask(logits, mask, masked);
  for (int32_t t = 0; t < 70; ++t) {
    INFO("token " << t);
    CHECK((t == 5 || t == 33 || t == 69) == std::isfinite(masked[static_cast<size_t>(t)]));
  }
  auto s = make_cpu_sampler();
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.logprobs = true;
  greedy.top_logprobs = 2;
  SamplingParams random;
  random.temperature = 1.5f;
  std::vector<float> copy = logits;
  Tensor t(nullptr, copy.data(), ds::DType::f32, Shape{1, static_cast<int64_t>(copy.size())});
  for (const SamplingParams* p : {&greedy, &random}) {
    for (uint64_t seed = 0; seed < 50; ++seed) {
      SamplerRng rng(seed);
      SampleRow row{p, {}, {}, &rng};
      row.allowed = mask;
      SampledToken out;
      s->sample(t, std::span<const SampleRow>(&row, 1), std::span<SampledToken>(&out, 1));
      CHECK((out.token == 5 || out.token == 33 || out.token == 69));
      if (p == &greedy) {
        CHECK(out.token == 33);
        // Logprobs are those of the masked row: the three allowed tokens share the mass.
        const double z = std::exp(0.0) + std::exp(2.0) + std::exp(1.0);
        CHECK(out.logprob == Approx(2.0 - std::log(z)).epsilon(1e-5));
        REQUIRE(out.top.size() == 2);
        CHECK(out.top[1].token == 69);
      }
    }
  }
}
