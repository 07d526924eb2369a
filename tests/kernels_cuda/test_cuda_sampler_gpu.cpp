// The device sampler against the CPU sampler (the reference semantics) on random logits:
// greedy, temperature with min_p / top_k / top_p, penalties and bias, logprobs, token masks;
// the same seeds must give the same tokens row by row, and failing rows (NaN) must fail.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>
#include <span>

#include "kernels/cpu/sampler.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_sampler.h"

using namespace ds;
using kernels::SampledToken;
using kernels::SampleRow;
using SamplingParams = kernels::SamplerSettings;

namespace {

const std::vector<int32_t> kPrompt = {1, 2, 3, 17, 40000, 5};
const std::vector<int32_t> kGenerated = {5, 5, 7, 123, 17};

// One batch through both samplers: row r has params[r], masks[r] (none when empty or absent)
// and a generator seeded seed0 + r on each side.
struct BothSampled {
  std::vector<SampledToken> cpu, gpu;
  std::vector<kernels::SamplerRng> cpu_rng, gpu_rng;
};

BothSampled sample_both(kernels::Backend& gpu, kernels::Sampler& gs, const std::vector<SamplingParams>& params,
                        const std::vector<float>& logits, int64_t V, uint64_t seed0,
                        const std::vector<std::vector<uint32_t>>& masks = {}) {
  static const auto cs = kernels::cpu::make_cpu_sampler();
  const auto R = static_cast<int64_t>(params.size());
  BothSampled b;
  for (int64_t r = 0; r < R; ++r) {
    b.cpu_rng.emplace_back(seed0 + static_cast<uint64_t>(r));
    b.gpu_rng.emplace_back(seed0 + static_cast<uint64_t>(r));
  }
  std::vector<SampleRow> rows_c, rows_g;
  for (size_t i = 0; i < params.size(); ++i) {
    std::span<const uint32_t> mask;
    if (i < masks.size()) mask = masks[i];
    rows_c.push_back({&params[i], kPrompt, kGenerated, &b.cpu_rng[i], mask});
    rows_g.push_back({&params[i], kPrompt, kGenerated, &b.gpu_rng[i], mask});
  }
  auto host = std::make_shared<std::vector<float>>(logits);
  kernels::Tensor lc(std::shared_ptr<void>(host, host->data()), host->data(), DType::f32, {R, V});
  kernels::Tensor lg = gpu.alloc(DType::f32, {R, V});
  gpu.copy_from_host(logits, lg);
  b.cpu.resize(params.size());
  b.gpu.resize(params.size());
  cs->sample(lc, rows_c, b.cpu);
  gs.sample(lg, rows_g, b.gpu);
  return b;
}

// Whether two logprobs agree: both -inf (a masked alternative), or within the tolerance.
bool same_logprob(float a, float b) {
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= 1e-4f;
}

// Row r of both samplers: the same token, logprobs and alternatives, and both generators
// advanced alike (one draw per sampled non-greedy row; a row that cannot be sampled fails its
// request, whatever its generator did).
void check_same_row(const BothSampled& b, const std::vector<SamplingParams>& params, size_t r) {
  const SampledToken& g = b.gpu[r];
  const SampledToken& c = b.cpu[r];
  CHECK(g.token == c.token);
  if (c.token >= 0 && params[r].logprobs) {
    CHECK(same_logprob(g.logprob, c.logprob));
    REQUIRE(g.top.size() == c.top.size());
    for (size_t k = 0; k < g.top.size(); ++k) {
      INFO("alternative " << k << ": " << g.top[k].token << " " << g.top[k].logprob << " vs " << c.top[k].token << " "
                          << c.top[k].logprob);
      CHECK(g.top[k].token == c.top[k].token);
      CHECK(same_logprob(g.top[k].logprob, c.top[k].logprob));
    }
  }
  if (c.token >= 0) CHECK(b.gpu_rng[r].state == b.cpu_rng[r].state);
}

bool allowed_by(std::span<const uint32_t> mask, int32_t t) {
  const auto w = static_cast<size_t>(t) / 32;
  return w < mask.size() && (mask[w] >> (t % 32) & 1u);
}

}  // namespace

TEST_CASE("cuda sampler: same tokens and logprobs as the CPU sampler", "[cuda_sampler][gpu]") {
  auto gpu = cuda::make_cuda_backend();
  auto gs = cuda::make_cuda_sampler(*gpu);
  const int64_t V = 50000;
  std::vector<SamplingParams> params(12);
  params[0].temperature = 0;  // greedy
  params[1].temperature = 0.8f;
  params[2].temperature = 1.0f, params[2].top_k = 40;
  params[3].temperature = 1.2f, params[3].top_p = 0.9f;
  params[4].temperature = 0.7f, params[4].min_p = 0.05f;
  params[5].temperature = 1.0f, params[5].top_k = 100, params[5].top_p = 0.8f, params[5].min_p = 0.01f;
  params[6].temperature = 1.0f, params[6].repetition_penalty = 1.3f, params[6].frequency_penalty = 0.5f,
  params[6].presence_penalty = 0.3f;
  params[7].temperature = 0, params[7].logit_bias = {{17, 30.0f}, {17, 1.5f}, {99, -5.0f}};
  params[8].temperature = 0.9f, params[8].top_p = 0.5f, params[8].logprobs = true, params[8].top_logprobs = 5;
  params[9].temperature = 0, params[9].logprobs = true, params[9].top_logprobs = 20;
  params[10].temperature = 2.0f, params[10].top_k = 1;  // greedy by top_k
  params[11].temperature = 1.0f, params[11].top_p = 0.999f, params[11].repetition_penalty = 0.8f;

  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<float> logits(params.size() * static_cast<size_t>(V));
    for (auto& x : logits) x = nd(rng);
    if (trial == 5) logits[3 * V + 11] = NAN;  // row 3 cannot be sampled
    const BothSampled b = sample_both(*gpu, *gs, params, logits, V, 1000 * static_cast<uint64_t>(trial));
    for (size_t r = 0; r < params.size(); ++r) {
      INFO("trial " << trial << " row " << r);
      check_same_row(b, params, r);
    }
    if (trial == 5) CHECK(b.gpu[3].token == -1);
  }
}

// Structured outputs' token bitmasks (kernels/sampler.h): random subsets of a vocabulary that
// is not a whole number of words, a row with one allowed token, a mask shorter than the
// vocabulary, one with nothing allowed, masks beside bias and penalties (a bias on a forbidden
// token must not revive it), and rows without a mask in the same batch; greedy and seeded rows,
// logprobs of the masked row with top_logprobs (past the allowed tokens: -inf, in token order).
TEST_CASE("cuda sampler: token masks as the CPU sampler", "[cuda_sampler][gpu][masks]") {
  auto gpu = cuda::make_cuda_backend();
  auto gs = cuda::make_cuda_sampler(*gpu);
  REQUIRE(gs->applies_token_masks());
  const int64_t V = 50000;  // 1562.5 words: the last word is half the vocabulary's
  const auto W = static_cast<size_t>((V + 31) / 32);
  std::vector<SamplingParams> params(12);
  params[0].temperature = 0;
  params[1].temperature = 1.0f, params[1].logprobs = true, params[1].top_logprobs = 5;
  params[2].temperature = 0, params[2].logprobs = true, params[2].top_logprobs = 3;  // no mask
  params[3].temperature = 1.0f, params[3].top_p = 0.9f, params[3].logprobs = true, params[3].top_logprobs = 5;
  params[4].temperature = 0.8f, params[4].top_k = 50;
  params[5].temperature = 1.0f, params[5].top_p = 0.95f;  // no mask
  params[6].temperature = 0, params[6].repetition_penalty = 1.3f, params[6].frequency_penalty = 0.5f,
  params[6].logit_bias = {{17, 100.0f}, {18, 100.0f}};
  params[7].temperature = 0.9f, params[7].top_p = 0.8f, params[7].min_p = 0.05f, params[7].logprobs = true,
  params[7].top_logprobs = 20;
  params[8].temperature = 1.0f, params[8].logprobs = true;
  params[9].temperature = 0.7f, params[9].top_k = 3, params[9].presence_penalty = 1.0f;
  params[10].temperature = 1.0f;
  params[11].temperature = 1.2f, params[11].min_p = 0.1f, params[11].logit_bias = {{40000, 5.0f}};

  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<float> logits(params.size() * static_cast<size_t>(V));
    for (auto& x : logits) x = nd(rng);
    auto random_mask = [&](double p_allowed, size_t words) {
      std::vector<uint32_t> m(words, 0);
      std::bernoulli_distribution keep(p_allowed);
      for (size_t t = 0; t < std::min(words * 32, static_cast<size_t>(V)); ++t)
        if (keep(rng)) m[t / 32] |= 1u << (t % 32);
      return m;
    };
    std::vector<std::vector<uint32_t>> masks(params.size());
    masks[0] = random_mask(0.3, W);
    masks[1] = random_mask(0.05, W);
    masks[3] = std::vector<uint32_t>(W, 0);
    const auto only = static_cast<int32_t>(rng() % static_cast<uint64_t>(V));
    masks[3][static_cast<size_t>(only) / 32] |= 1u << (only % 32);
    masks[4] = random_mask(0.5, W / 3);  // shorter: every token past W / 3 words is forbidden
    masks[6] = random_mask(0.2, W);
    masks[6][0] &= ~(3u << 17);  // tokens 17 and 18 (biased +100) forbidden
    masks[7] = random_mask(0.01, W);
    masks[8] = std::vector<uint32_t>(W + 3, ~0u);  // everything, and words past the vocabulary
    masks[9] = std::vector<uint32_t>(W, 0);
    masks[9][W / 2] = 0x00f0f00fu;  // a few tokens of one word
    masks[10] = std::vector<uint32_t>(W, 0);  // nothing allowed: the row fails
    masks[11] = random_mask(0.001, W);
    masks[11][40000 / 32] |= 1u << (40000 % 32);
    if (trial == 4) {
      // A NaN under a forbidden token is never read; one in a row without a mask fails it.
      masks[0][0] &= ~2u;
      logits[1] = NAN;
      logits[5 * static_cast<size_t>(V) + 2] = NAN;
    }
    const BothSampled b = sample_both(*gpu, *gs, params, logits, V, 77 * static_cast<uint64_t>(trial), masks);
    for (size_t r = 0; r < params.size(); ++r) {
      INFO("trial " << trial << " row " << r);
      check_same_row(b, params, r);
      if (!masks[r].empty() && b.gpu[r].token >= 0) CHECK(allowed_by(masks[r], b.gpu[r].token));
      if (b.gpu[r].token >= 0 && params[r].logprobs) CHECK(std::isfinite(b.gpu[r].logprob));
    }
    CHECK(b.gpu[3].token == only);
    CHECK(b.gpu[3].logprob == Approx(0.0f).margin(1e-6));  // the masked row's whole mass
    REQUIRE(b.gpu[3].top.size() == 5);
    CHECK(std::isinf(b.gpu[3].top[1].logprob));
    CHECK(b.gpu[10].token == -1);
    CHECK(b.gpu[0].token >= 0);
    if (trial == 4) CHECK(b.gpu[5].token == -1);
    CHECK(b.gpu[6].token != 17);
    CHECK(b.gpu[6].token != 18);
    if (b.gpu[4].token >= 0) CHECK(b.gpu[4].token < static_cast<int32_t>(W / 3 * 32));
  }
}
