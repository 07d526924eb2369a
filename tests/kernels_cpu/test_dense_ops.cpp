// The CPU backend's row-wise ops against float64 references: norms, GEMM, gates, RoPE,
// embedding and the logits gather.
#include <catch2/catch.hpp>

#include <numeric>

#include "tests/kernels_cpu/kernel_test_util.h"

using Catch::Matchers::Contains;
using ds::kernels::Shape;
namespace t = ds::test;

namespace {
double silu(double x) { return x / (1 + std::exp(-x)); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
}  // namespace

TEST_CASE("rms_norm: zero-centred weight (1 + w), per row and per head, in place", "[kernels]") {
  auto be = t::cpu();
  const int64_t rows = 37, heads = 3, d = 40;
  const auto xs = t::random_vec(rows * heads * d, 1, 3.0f);
  const auto ws = t::random_vec(d, 2, 0.5f);
  std::vector<double> want(xs.size());
  for (int64_t r = 0; r < rows * heads; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += double(xs[r * d + i]) * xs[r * d + i];
    const double inv = 1 / std::sqrt(ss / d + 1e-6);
    for (int64_t i = 0; i < d; ++i) want[r * d + i] = xs[r * d + i] * inv * (1 + double(ws[i]));
  }
  auto x = t::make(*be, Shape{rows, heads, d}, xs);
  auto w = t::make(*be, Shape{d}, ws);
  auto out = t::zeros(*be, Shape{rows, heads, d});
  be->rms_norm(x, w, 1e-6f, out);
  CHECK(t::max_err(t::get(*be, out), want) < 2e-6);
  be->rms_norm(x, w, 1e-6f, x);  // in place
  CHECK(t::get(*be, x) == t::get(*be, out));
  auto bad = t::zeros(*be, Shape{rows, d + 1});
  CHECK_THROWS_WITH(be->rms_norm(bad, w, 1e-6f, bad), Contains("rms_norm") && Contains("must end in"));
}

TEST_CASE("gated_rms_norm: plain weight, normalised per head, times silu(z)", "[kernels]") {
  auto be = t::cpu();
  const int64_t rows = 5, heads = 4, d = 32;
  const auto xs = t::random_vec(rows * heads * d, 3);
  const auto zs = t::random_vec(rows * heads * d, 4, 2.0f);
  const auto ws = t::random_vec(d, 5);
  std::vector<double> want(xs.size());
  for (int64_t r = 0; r < rows * heads; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += double(xs[r * d + i]) * xs[r * d + i];
    const double inv = 1 / std::sqrt(ss / d + 1e-6);
    for (int64_t i = 0; i < d; ++i) want[r * d + i] = ws[i] * (xs[r * d + i] * inv) * silu(zs[r * d + i]);
  }
  auto x = t::make(*be, Shape{rows, heads, d}, xs);
  auto z = t::make(*be, Shape{rows, heads, d}, zs);
  auto w = t::make(*be, Shape{d}, ws);
  be->gated_rms_norm(x, z, w, 1e-6f, x);
  CHECK(t::max_err(t::get(*be, x), want) < 2e-6);
}

TEST_CASE("gemm: x · wᵀ for decode-sized and prefill-sized x, with accumulation", "[kernels]") {
  auto be = t::cpu();
  for (int64_t m : {1, 2, 3, 33}) {
    for (int64_t n : {5, 130}) {
      const int64_t k = 70;
      const auto xs = t::random_vec(m * k, 10 + m);
      const auto ws = t::random_vec(n * k, 20 + n);
      const auto cs = t::random_vec(m * n, 30);
      std::vector<double> want(m * n), want_acc(m * n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t q = 0; q < k; ++q) s += double(xs[i * k + q]) * ws[j * k + q];
          want[i * n + j] = s;
          want_acc[i * n + j] = s + cs[i * n + j];
        }
      auto x = t::make(*be, Shape{m, k}, xs);
      auto w = t::make(*be, Shape{n, k}, ws);
      auto out = t::make(*be, Shape{m, n}, cs);
      be->gemm(x, w, out, true);
      CHECK(t::max_err(t::get(*be, out), want_acc) < 1e-5);
      be->gemm(x, w, out, false);
      CHECK(t::max_err(t::get(*be, out), want) < 1e-5);
    }
  }
  auto x = t::zeros(*be, Shape{2, 3});
  auto w = t::zeros(*be, Shape{4, 5});
  auto o = t::zeros(*be, Shape{2, 4});
  CHECK_THROWS_WITH(be->gemm(x, w, o, false), Contains("gemm") && Contains("disagree on K"));
}

TEST_CASE("swiglu, sigmoid_gate and split_query_gate", "[kernels]") {
  auto be = t::cpu();
  const int64_t m = 6, inter = 9;
  const auto gu = t::random_vec(m * 2 * inter, 40, 3.0f);
  std::vector<double> want(m * inter);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < inter; ++i) want[r * inter + i] = silu(gu[r * 2 * inter + i]) * gu[r * 2 * inter + inter + i];
  auto a = t::make(*be, Shape{m, 2 * inter}, gu);
  auto out = t::zeros(*be, Shape{m, inter});
  be->swiglu(a, out);
  CHECK(t::max_err(t::get(*be, out), want) < 1e-6);

  const int64_t heads = 3, d = 4;
  const auto qg = t::random_vec(m * heads * 2 * d, 41);
  auto qgt = t::make(*be, Shape{m, heads, 2 * d}, qg);
  auto q = t::zeros(*be, Shape{m, heads, d}), gate = t::zeros(*be, Shape{m, heads, d});
  be->split_query_gate(qgt, q, gate);
  const auto qh = t::get(*be, q), gh = t::get(*be, gate);
  for (int64_t r = 0; r < m * heads; ++r)
    for (int64_t i = 0; i < d; ++i) {
      REQUIRE(qh[r * d + i] == qg[r * 2 * d + i]);
      REQUIRE(gh[r * d + i] == qg[r * 2 * d + d + i]);
    }
  std::vector<double> gated(qh.size());
  for (size_t i = 0; i < qh.size(); ++i) gated[i] = qh[i] * sigmoid(gh[i]);
  be->sigmoid_gate(q, gate);
  CHECK(t::max_err(t::get(*be, q), gated) < 1e-6);
}

TEST_CASE("rope: rotate-half on the first R dims at each row's position, the rest untouched", "[kernels]") {
  auto be = t::cpu();
  const int64_t heads = 2, d = 16, r = 8;
  const double theta = 1e7;
  // Two sequences: 3 tokens from position 0, 2 tokens from position 1000.
  std::vector<int32_t> blocks(64);
  std::iota(blocks.begin(), blocks.end(), 0);
  auto plan = t::plan_of(*be, {{3, 0, 0, {0}}, {2, 1000, 1, blocks}}, 16, 64, 2);
  const std::vector<int64_t> pos = {0, 1, 2, 1000, 1001};
  const auto xs = t::random_vec(5 * heads * d, 50);
  std::vector<double> want(xs.begin(), xs.end());
  for (int64_t row = 0; row < 5; ++row)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < r / 2; ++i) {
        // HF's float32 angle: f32(p * f32(1 / theta^(2i/R))).
        const float inv = 1.0f / static_cast<float>(std::pow(theta, double(float(2 * i) / float(r))));
        const double a = static_cast<float>(static_cast<float>(pos[row]) * inv);
        const int64_t o = (row * heads + h) * d;
        const double x1 = xs[o + i], x2 = xs[o + i + r / 2];
        want[o + i] = x1 * std::cos(a) - x2 * std::sin(a);
        want[o + i + r / 2] = x2 * std::cos(a) + x1 * std::sin(a);
      }
  auto x = t::make(*be, Shape{5, heads, d}, xs);
  be->rope(x, *plan, {r, theta});
  const auto got = t::get(*be, x);
  CHECK(t::max_err(got, want) < 1e-6);
  for (int64_t row = 0; row < 5 * heads; ++row)
    for (int64_t i = r; i < d; ++i) REQUIRE(got[row * d + i] == xs[row * d + i]);
  // Position 0 is the identity.
  for (int64_t i = 0; i < heads * d; ++i) REQUIRE(got[i] == xs[i]);
}


TEST_CASE("rope: a frequency table and attention scaling (YaRN) at positions far apart", "[kernels]") {
  auto be = t::cpu();
  const int64_t heads = 2, d = 32, r = 16;
  std::vector<int32_t> blocks(64);
  std::iota(blocks.begin(), blocks.end(), 0);
  // Single-token sequences at positions 0, 63, 64, 255 and 1048575 (1M tokens).
  const std::vector<int64_t> pos = {0, 63, 64, 255, 1048575};
  std::vector<t::SeqDesc> seqs;
  for (size_t s = 0; s < pos.size(); ++s) seqs.push_back({1, pos[s], static_cast<int32_t>(s), blocks});
  auto plan = t::plan_of(*be, seqs, 1 << 15, 64, 5);
  ds::kernels::RopeParams p;
  p.rotary_dim = r;
  for (int64_t i = 0; i < r / 2; ++i) p.inv_freq.push_back(static_cast<float>(std::pow(0.37, static_cast<double>(i))));
  p.attention_scaling = 1.138629436f;
  const auto xs = t::random_vec(5 * heads * d, 51);
  std::vector<double> want(xs.begin(), xs.end());
  for (int64_t row = 0; row < 5; ++row)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < r / 2; ++i) {
        const double a = static_cast<float>(static_cast<float>(pos[row]) * p.inv_freq[i]);  // HF's f32 angle
        const double c = std::cos(a) * p.attention_scaling, s = std::sin(a) * p.attention_scaling;
        const int64_t o = (row * heads + h) * d;
        const double x1 = xs[o + i], x2 = xs[o + i + r / 2];
        want[o + i] = x1 * c - x2 * s;
        want[o + i + r / 2] = x2 * c + x1 * s;
      }
  auto x = t::make(*be, Shape{5, heads, d}, xs);
  be->rope(x, *plan, p);
  const auto got = t::get(*be, x);
  CHECK(t::max_err(got, want) < 1e-6);
  for (int64_t row = 0; row < 5 * heads; ++row)
    for (int64_t i = r; i < d; ++i) REQUIRE(got[row * d + i] == xs[row * d + i]);  // neither rotated nor scaled
  // The contract: a table of the wrong length, or a scaling that is not positive, is refused.
  ds::kernels::RopeParams bad = p;
  bad.inv_freq.pop_back();
  CHECK_THROWS_AS(be->rope(x, *plan, bad), std::invalid_argument);
  bad = p;
  bad.attention_scaling = 0;
  CHECK_THROWS_AS(be->rope(x, *plan, bad), std::invalid_argument);
}

TEST_CASE("embedding and gather_rows", "[kernels]") {
  auto be = t::cpu();
  const int64_t vocab = 11, h = 6;
  const auto table = t::random_vec(vocab * h, 60);
  // The logits gather takes each sequence's last row: rows 1 and 2.
  auto plan = t::plan_of(*be, {{2, 0, 0, {0}, {}, {}, 1}, {1, 0, 1, {1}, {}, {}, 1}}, 4, 2, 2, {10, 0, 7});
  auto tt = t::make(*be, Shape{vocab, h}, table);
  auto out = t::zeros(*be, Shape{3, h});
  be->embedding(tt, *plan, out);
  const auto e = t::get(*be, out);
  const std::vector<int> ids = {10, 0, 7};
  for (int r = 0; r < 3; ++r)
    for (int64_t i = 0; i < h; ++i) REQUIRE(e[r * h + i] == table[ids[r] * h + i]);
  auto g = t::zeros(*be, Shape{2, h});
  be->gather_rows(out, *plan, g);
  const auto gv = t::get(*be, g);
  for (int64_t i = 0; i < h; ++i) {
    REQUIRE(gv[i] == table[0 * h + i]);
    REQUIRE(gv[h + i] == table[7 * h + i]);
  }
  auto small = t::make(*be, Shape{5, h}, std::vector<float>(5 * h));
  CHECK_THROWS_WITH(be->embedding(small, *plan, out), Contains("token id 10 outside the table"));
}

TEST_CASE("split_columns copies consecutive column ranges and refuses parts that do not add up", "[kernels]") {
  auto be = t::cpu();
  const int64_t m = 5, n = 4 + 6 + 1 + 1;  // DeltaNet-like: [qkv | z | b | a]
  const auto x = t::random_vec(m * n, 42);
  auto xt = t::make(*be, Shape{m, n}, x);
  ds::kernels::Tensor parts[] = {t::zeros(*be, Shape{m, 4}), t::zeros(*be, Shape{m, 2, 3}), t::zeros(*be, Shape{m, 1}),
                                 t::zeros(*be, Shape{m, 1})};
  be->split_columns(xt, parts);
  int64_t first = 0;
  for (auto& p : parts) {
    const int64_t w = p.numel() / m;
    const auto got = t::get(*be, p);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < w; ++c) REQUIRE(got[r * w + c] == x[r * n + first + c]);
    first += w;
  }
  CHECK(first == n);

  ds::kernels::Tensor short_parts[] = {t::zeros(*be, Shape{m, 4}), t::zeros(*be, Shape{m, 7})};
  CHECK_THROWS_WITH(be->split_columns(xt, short_parts), Contains("the parts hold 11 columns, x has 12"));
  ds::kernels::Tensor wrong_rows[] = {t::zeros(*be, Shape{m + 1, 12})};
  CHECK_THROWS_WITH(be->split_columns(xt, wrong_rows), Contains("each part must have 5 rows"));
  ds::kernels::Tensor too_many[] = {t::zeros(*be, Shape{m, 2}), t::zeros(*be, Shape{m, 2}), t::zeros(*be, Shape{m, 2}),
                                    t::zeros(*be, Shape{m, 2}), t::zeros(*be, Shape{m, 4})};
  CHECK_THROWS_WITH(be->split_columns(xt, too_many), Contains("between 1 and 4 parts"));
}

TEST_CASE("Tensor::rows of an int4 weight starts on a row group and carries its rows' groups", "[kernels]") {
  // Any memory will do: rows() only moves pointers. 24 rows x 256 columns, groups of 128.
  const int64_t N = 24, K = 256, G = 128;
  std::vector<uint8_t> codes(static_cast<size_t>(N * K / 2));
  std::vector<float> scales(static_cast<size_t>(N * (K / G)));
  std::vector<uint8_t> zeros(scales.size());
  const ds::kernels::Tensor w(std::shared_ptr<void>(), codes.data(), Shape{N, K},
                              ds::kernels::Int4Groups{scales.data(), zeros.data(), G, nullptr});
  const auto view = w.rows(ds::kernels::kInt4RowGroup, N - ds::kernels::kInt4RowGroup);
  CHECK(view.data() == codes.data() + ds::kernels::kInt4RowGroup * K / 2);
  CHECK(view.int4_groups().scales == scales.data() + ds::kernels::kInt4RowGroup * (K / G));
  CHECK(view.int4_groups().zeros == zeros.data() + ds::kernels::kInt4RowGroup * (K / G));
  CHECK_THROWS_WITH(w.rows(3, 8), Contains("int4 rows from 3 split a group of 8 rows"));
}
