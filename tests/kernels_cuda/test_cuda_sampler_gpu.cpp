// The device sampler against the CPU sampler (the reference semantics) on random logits:
// greedy, temperature with min_p / top_k / top_p, penalties and bias, logprobs; the same
// seeds must give the same tokens row by row, and failing rows (NaN) must fail.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "kernels/cpu/sampler.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_sampler.h"

using namespace ds;
using kernels::SampledToken;
using kernels::SampleRow;
using SamplingParams = kernels::SamplerSettings;

TEST_CASE("cuda sampler: same tokens and logprobs as the CPU sampler", "[cuda_sampler][gpu]") {
  auto gpu = cuda::make_cuda_backend();
  auto cs = kernels::cpu::make_cpu_sampler();
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
  const std::vector<int32_t> prompt = {1, 2, 3, 17, 40000, 5};
  const std::vector<int32_t> generated = {5, 5, 7, 123, 17};
  for (int trial = 0; trial < 6; ++trial) {
    const auto R = static_cast<int64_t>(params.size());
    std::vector<float> logits(static_cast<size_t>(R * V));
    for (auto& x : logits) x = nd(rng);
    if (trial == 5) logits[3 * V + 11] = NAN;  // row 3 cannot be sampled
    std::vector<kernels::SamplerRng> rc, rg;
    for (int64_t r = 0; r < R; ++r) rc.emplace_back(1000 * trial + r), rg.emplace_back(1000 * trial + r);
    std::vector<SampleRow> rows_c, rows_g;
    for (int64_t r = 0; r < R; ++r) {
      rows_c.push_back({&params[static_cast<size_t>(r)], prompt, generated, &rc[static_cast<size_t>(r)]});
      rows_g.push_back({&params[static_cast<size_t>(r)], prompt, generated, &rg[static_cast<size_t>(r)]});
    }
    auto host = std::make_shared<std::vector<float>>(logits);
    kernels::Tensor lc(std::shared_ptr<void>(host, host->data()), host->data(), DType::f32, {R, V});
    kernels::Tensor lg = gpu->alloc(DType::f32, {R, V});
    gpu->copy_from_host(logits, lg);
    std::vector<SampledToken> oc(static_cast<size_t>(R)), og(static_cast<size_t>(R));
    cs->sample(lc, rows_c, oc);
    gs->sample(lg, rows_g, og);
    for (int64_t r = 0; r < R; ++r) {
      INFO("trial " << trial << " row " << r);
      const auto& a = og[static_cast<size_t>(r)];
      const auto& b = oc[static_cast<size_t>(r)];
      CHECK(a.token == b.token);
      if (b.token >= 0 && params[static_cast<size_t>(r)].logprobs) {
        CHECK(a.logprob == Approx(b.logprob).margin(1e-4));
        REQUIRE(a.top.size() == b.top.size());
        for (size_t k = 0; k < a.top.size(); ++k) {
          CHECK(a.top[k].token == b.top[k].token);
          CHECK(a.top[k].logprob == Approx(b.top[k].logprob).margin(1e-4));
        }
      }
      // Both generators advanced alike (one draw per sampled non-greedy row; a row that
      // cannot be sampled fails its request, whatever its generator did).
      if (b.token >= 0) CHECK(rg[static_cast<size_t>(r)].state == rc[static_cast<size_t>(r)].state);
    }
    if (trial == 5) CHECK(og[3].token == -1);
  }
}
