// kv_write + paged_attention over a mixed batch (a decode row, a continued prefill chunk, a
// fresh prefill) with shuffled block ids, against float64 attention over contiguous K/V.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "tests/kernels_cpu/kernel_test_util.h"

using Catch::Matchers::Contains;
using ds::kernels::Shape;
namespace t = ds::test;

TEST_CASE("paged attention: mixed batch through shuffled blocks equals dense causal GQA attention", "[kernels]") {
  auto be = t::cpu();
  const int64_t nq = 4, nkv = 2, d = 8, bs = 4, nblocks = 20;
  struct S {
    int64_t cached, n;
  };
  const std::vector<S> seqs = {{9, 1}, {5, 6}, {0, 4}};
  std::vector<int32_t> order(nblocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  std::vector<t::SeqDesc> desc;
  std::vector<std::vector<float>> kall, vall;
  size_t next_block = 0;
  int64_t rows = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t len = seqs[s].cached + seqs[s].n;
    std::vector<int32_t> ids;
    for (int64_t b = 0; b < (len + bs - 1) / bs; ++b) ids.push_back(order[next_block++]);
    desc.push_back({seqs[s].n, seqs[s].cached, static_cast<int32_t>(s), ids});
    kall.push_back(t::random_vec(len * nkv * d, 100 + s));
    vall.push_back(t::random_vec(len * nkv * d, 200 + s));
    rows += seqs[s].n;
  }
  auto plan = t::plan_of(*be, desc, bs, nblocks, 3);

  // The cached history goes into the pools directly; the new rows through kv_write.
  std::vector<float> kp(nblocks * bs * nkv * d, NAN), vp(kp.size(), NAN);
  std::vector<float> knew, vnew;
  for (size_t s = 0; s < seqs.size(); ++s)
    for (int64_t p = 0; p < seqs[s].cached + seqs[s].n; ++p) {
      const auto* k = &kall[s][p * nkv * d];
      const auto* v = &vall[s][p * nkv * d];
      if (p < seqs[s].cached) {
        const int64_t slot = desc[s].blocks[p / bs] * bs + p % bs;
        std::copy(k, k + nkv * d, kp.begin() + slot * nkv * d);
        std::copy(v, v + nkv * d, vp.begin() + slot * nkv * d);
      } else {
        knew.insert(knew.end(), k, k + nkv * d);
        vnew.insert(vnew.end(), v, v + nkv * d);
      }
    }
  auto kpool = t::make(*be, Shape{nblocks, bs, nkv, d}, kp);
  auto vpool = t::make(*be, Shape{nblocks, bs, nkv, d}, vp);
  auto kt = t::make(*be, Shape{rows, nkv, d}, knew);
  auto vt = t::make(*be, Shape{rows, nkv, d}, vnew);
  be->kv_write(kt, vt, *plan, kpool, vpool);

  const auto qs = t::random_vec(rows * nq * d, 300, 2.0f);
  auto q = t::make(*be, Shape{rows, nq, d}, qs);
  auto out = t::zeros(*be, Shape{rows, nq, d});
  const float scale = 1.0f / std::sqrt(float(d));
  be->paged_attention(q, kpool, vpool, *plan, scale, out);

  std::vector<double> want;
  int64_t row = 0;
  for (size_t s = 0; s < seqs.size(); ++s)
    for (int64_t t0 = 0; t0 < seqs[s].n; ++t0, ++row) {
      const int64_t p = seqs[s].cached + t0;
      for (int64_t h = 0; h < nq; ++h) {
        const int64_t g = h / (nq / nkv);
        std::vector<double> sc(p + 1);
        for (int64_t j = 0; j <= p; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += double(qs[(row * nq + h) * d + i]) * kall[s][(j * nkv + g) * d + i];
          sc[j] = dot * scale;
        }
        const double mx = *std::max_element(sc.begin(), sc.end());
        double sum = 0;
        for (auto& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t i = 0; i < d; ++i) {
          double o = 0;
          for (int64_t j = 0; j <= p; ++j) o += sc[j] / sum * vall[s][(j * nkv + g) * d + i];
          want.push_back(o);
        }
      }
    }
  CHECK(t::max_err(t::get(*be, out), want) < 1e-5);

  auto wrong = t::zeros(*be, Shape{nblocks, bs + 1, nkv, d});
  CHECK_THROWS_WITH(be->paged_attention(q, wrong, wrong, *plan, scale, out), Contains("block size"));
}

TEST_CASE("batch plan: indices are checked before any op sees them", "[kernels]") {
  auto be = t::cpu();
  auto err = [&](std::vector<t::SeqDesc> seqs, std::vector<int32_t> tokens = {}) -> std::string {
    try {
      t::plan_of(*be, seqs, 4, 8, 2, tokens);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(err({{3, 2, 0, {5, 6}}}) == "accepted");
  CHECK_THAT(err({{3, 2, 0, {5}}}), Contains("needs room for 5 tokens"));
  CHECK_THAT(err({{1, 0, 0, {8}}}), Contains("block id 8 outside the pool of 8"));
  CHECK_THAT(err({{1, 0, 0, {-1}}}), Contains("block id -1"));
  CHECK_THAT(err({{1, 0, 2, {1}}}), Contains("state slot 2 outside [0, 2)"));
  CHECK_THAT(err({{1, 0, 0, {1}}, {1, 0, 1, {1}}}), Contains("same K/V slot"));
  CHECK_THAT(err({{1, 0, 0, {1}}, {1, 0, 0, {2}}}), Contains("share a state slot"));
  CHECK_THAT(err({{0, 0, 0, {1}}}), Contains("no new tokens"));
  CHECK_THAT(err({{1, -1, 0, {1}}}), Contains("negative cached length"));
  CHECK_THAT(err({{2, 0, 0, {1}, {}, {}, 3}}), Contains("asks for 3 logit rows of 2 tokens"));
  CHECK_THAT(err({{1, 0, 0, {1}}}, {-3}), Contains("token id -3 outside the vocabulary"));
}
