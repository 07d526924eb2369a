// The vision encoder's ops on the CPU backend against float64 references, and M-RoPE
// positions in RoPE: LayerNorm, bias, both GELUs (alone and after a GEMM with its bias), the
// resampled position table, the 2-D rotary tables, attention within segments, and the
// interleaved multimodal rotary.
#include <catch2/catch.hpp>

#include "tests/kernels_cpu/kernel_test_util.h"

using Catch::Matchers::Contains;
using ds::kernels::Backend;
using ds::kernels::Shape;
using ds::kernels::VisionBatchDesc;
namespace t = ds::test;

namespace {

// A plan over segments with random taps and rotary tables.
struct VisionFixture {
  std::vector<int64_t> segments;
  std::vector<int32_t> idx;
  std::vector<float> w, cos, sin;
  int64_t table_rows = 9, half = 8;
  std::unique_ptr<ds::kernels::VisionPlan> plan(Backend& be) {
    int64_t rows = 0;
    for (int64_t s : segments) rows += s;
    std::mt19937 rng(3);
    idx.clear();
    w = t::random_vec(static_cast<size_t>(rows * 4), 5, 0.5f);
    for (int64_t i = 0; i < rows * 4; ++i) idx.push_back(static_cast<int32_t>(rng() % table_rows));
    const auto ang = t::random_vec(static_cast<size_t>(rows * half), 6, 3.0f);
    cos.clear();
    sin.clear();
    for (float a : ang) {
      cos.push_back(std::cos(a));
      sin.push_back(std::sin(a));
    }
    VisionBatchDesc d;
    d.segments = segments;
    d.pos_index = idx;
    d.pos_weight = w;
    d.pos_table_rows = table_rows;
    d.rope_half = half;
    d.rope_cos = cos;
    d.rope_sin = sin;
    return be.plan_vision(d);
  }
};

}  // namespace

TEST_CASE("layer_norm, add_bias and gelu against float64", "[kernels]") {
  auto be = t::cpu();
  const int64_t n = 19, d = 72;
  const auto xs = t::random_vec(n * d, 1, 2.0f);
  const auto ws = t::random_vec(d, 2), bs = t::random_vec(d, 3);
  std::vector<double> ln(xs.size()), biased(xs.size()), ge(xs.size()), gt(xs.size());
  for (int64_t r = 0; r < n; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += xs[r * d + i];
    mean /= d;
    for (int64_t i = 0; i < d; ++i) var += (xs[r * d + i] - mean) * (xs[r * d + i] - mean);
    const double inv = 1 / std::sqrt(var / d + 1e-6);
    for (int64_t i = 0; i < d; ++i) {
      const size_t k = static_cast<size_t>(r * d + i);
      ln[k] = (xs[k] - mean) * inv * ws[i] + bs[i];
      biased[k] = double(xs[k]) + bs[i];
      const double x = double(xs[k]) + bs[i];  // gelu adds the bias first
      ge[k] = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
      gt[k] = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    }
  }
  auto x = t::make(*be, Shape{n, d}, xs);
  auto w = t::make(*be, Shape{d}, ws);
  auto b = t::make(*be, Shape{d}, bs);
  auto out = t::zeros(*be, Shape{n, d});
  be->layer_norm(x, w, b, 1e-6f, out);
  CHECK(t::max_err(t::get(*be, out), ln) < 2e-6);
  be->gelu(x, b, Backend::Gelu::erf, out);
  CHECK(t::max_err(t::get(*be, out), ge) < 2e-6);
  be->gelu(x, b, Backend::Gelu::tanh, out);
  CHECK(t::max_err(t::get(*be, out), gt) < 2e-6);
  be->add_bias(x, b);
  CHECK(t::max_err(t::get(*be, x), biased) < 1e-6);
  auto short_w = t::zeros(*be, Shape{d - 1});
  CHECK_THROWS_WITH(be->layer_norm(x, short_w, b, 1e-6f, out), Contains("layer_norm"));
  CHECK_THROWS_WITH(be->add_bias(x, short_w), Contains("add_bias"));
}

TEST_CASE("gemm_bias_gelu: GELU(x · wᵀ + bias) against float64, and its contract", "[kernels]") {
  auto be = t::cpu();
  const int64_t m = 7, k = 40, n = 24;
  const auto xs = t::random_vec(m * k, 11), ws = t::random_vec(n * k, 12, 0.3f), bs = t::random_vec(n, 13);
  auto x = t::make(*be, Shape{m, k}, xs), w = t::make(*be, Shape{n, k}, ws), b = t::make(*be, Shape{n}, bs);
  auto scratch = t::zeros(*be, Shape{m, n}), out = t::zeros(*be, Shape{m, n});
  for (auto kind : {Backend::Gelu::erf, Backend::Gelu::tanh}) {
    std::vector<double> want(static_cast<size_t>(m * n));
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double v = bs[c];
        for (int64_t i = 0; i < k; ++i) v += double(xs[r * k + i]) * ws[c * k + i];
        want[static_cast<size_t>(r * n + c)] =
            kind == Backend::Gelu::erf ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))
                                       : 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      }
    be->gemm_bias_gelu(x, w, b, kind, scratch, out);
    CHECK(t::max_err(t::get(*be, out), want) < 1e-5);
  }
  auto short_b = t::zeros(*be, Shape{n - 1});
  auto small_scratch = t::zeros(*be, Shape{m, n - 1});
  CHECK_THROWS_WITH(be->gemm_bias_gelu(x, w, short_b, Backend::Gelu::erf, scratch, out), Contains("gemm_bias_gelu"));
  CHECK_THROWS_WITH(be->gemm_bias_gelu(x, w, b, Backend::Gelu::erf, small_scratch, out), Contains("gemm_bias_gelu"));
}

TEST_CASE("add_position_embedding and rotary_embedding follow the plan's taps and tables", "[kernels]") {
  auto be = t::cpu();
  VisionFixture f;
  f.segments = {5, 3};
  auto plan = f.plan(*be);
  const int64_t rows = 8, d = 16, heads = 3;
  const auto table_v = t::random_vec(f.table_rows * d, 7);
  const auto xs = t::random_vec(rows * d, 8);
  std::vector<double> want(xs.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < d; ++i) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += double(f.w[r * 4 + k]) * table_v[f.idx[r * 4 + k] * d + i];
      want[r * d + i] = xs[r * d + i] + acc;
    }
  auto table = t::make(*be, Shape{f.table_rows, d}, table_v);
  auto x = t::make(*be, Shape{rows, d}, xs);
  be->add_position_embedding(table, *plan, x);
  CHECK(t::max_err(t::get(*be, x), want) < 2e-6);

  const auto qs = t::random_vec(rows * heads * 16, 9);
  std::vector<double> rot(qs.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < 8; ++i) {
        const int64_t b = (r * heads + h) * 16;
        const double c = f.cos[r * 8 + i], s = f.sin[r * 8 + i];
        rot[b + i] = qs[b + i] * c - qs[b + i + 8] * s;
        rot[b + i + 8] = qs[b + i + 8] * c + qs[b + i] * s;
      }
  auto q = t::make(*be, Shape{rows, heads, 16}, qs);
  be->rotary_embedding(q, *plan);
  CHECK(t::max_err(t::get(*be, q), rot) < 2e-6);
  auto wrong = t::zeros(*be, Shape{rows, heads, 12});
  CHECK_THROWS_WITH(be->rotary_embedding(wrong, *plan), Contains("rotary_embedding"));
}

TEST_CASE("segment_attention: full attention within each segment, none across", "[kernels]") {
  auto be = t::cpu();
  VisionFixture f;
  f.segments = {70, 1, 131};  // query blocks of 64 split the long ones
  auto plan = f.plan(*be);
  const int64_t rows = 202, heads = 2, d = 24;
  const float scale = 1.0f / std::sqrt(24.0f);
  const auto qs = t::random_vec(rows * heads * d, 10), ks = t::random_vec(rows * heads * d, 11),
             vs = t::random_vec(rows * heads * d, 12);
  std::vector<double> want(qs.size());
  int64_t b = 0;
  for (int64_t n : f.segments) {
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = b; i < b + n; ++i) {
        std::vector<double> s(static_cast<size_t>(n));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += double(qs[(i * heads + h) * d + e]) * ks[((b + j) * heads + h) * d + e];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        for (auto& v : s) sum += (v = std::exp(v - mx));
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < n; ++j) acc += s[j] / sum * vs[((b + j) * heads + h) * d + e];
          want[(i * heads + h) * d + e] = acc;
        }
      }
    b += n;
  }
  auto q = t::make(*be, Shape{rows, heads, d}, qs);
  auto k = t::make(*be, Shape{rows, heads, d}, ks);
  auto v = t::make(*be, Shape{rows, heads, d}, vs);
  auto out = t::zeros(*be, Shape{rows, heads, d});
  be->segment_attention(q, k, v, *plan, scale, out);
  CHECK(t::max_err(t::get(*be, out), want) < 5e-6);
}

TEST_CASE("qkv_segment_attention: the fused projection's thirds plus bias, rotated, attended", "[kernels]") {
  auto be = t::cpu();
  VisionFixture f;
  f.segments = {5, 1, 7};
  auto plan = f.plan(*be);
  const int64_t rows = 13, heads = 2, d = 2 * f.half, c = heads * d;
  const float scale = 0.3f;
  const auto xs = t::random_vec(rows * 3 * c, 13), bs = t::random_vec(3 * c, 14);
  // The same steps by hand: q, k, v cut from the columns with their bias, then the single ops.
  std::vector<float> parts[3];
  for (int part = 0; part < 3; ++part)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < c; ++i) parts[part].push_back(xs[r * 3 * c + part * c + i] + bs[part * c + i]);
  const Shape s{rows, heads, d};
  auto q = t::make(*be, s, parts[0]), k = t::make(*be, s, parts[1]), v = t::make(*be, s, parts[2]);
  be->rotary_embedding(q, *plan);
  be->rotary_embedding(k, *plan);
  auto want = t::zeros(*be, s);
  be->segment_attention(q, k, v, *plan, scale, want);
  auto x = t::make(*be, Shape{rows, 3 * c}, xs), b = t::make(*be, Shape{3 * c}, bs);
  auto scratch = t::zeros(*be, Shape{3 * rows, c}), out = t::zeros(*be, s);
  be->qkv_segment_attention(x, b, *plan, scale, scratch, out);
  CHECK(t::get(*be, out) == t::get(*be, want));
  auto short_b = t::zeros(*be, Shape{3 * c - 1});
  CHECK_THROWS_WITH(be->qkv_segment_attention(x, short_b, *plan, scale, scratch, out),
                    Contains("qkv_segment_attention"));
  auto short_scratch = t::zeros(*be, Shape{3 * rows - 1, c});
  CHECK_THROWS_WITH(be->qkv_segment_attention(x, b, *plan, scale, short_scratch, out), Contains("scratch"));
}

TEST_CASE("gemm_bias: x times w transposed plus the bias, on top of out when accumulating", "[kernels]") {
  auto be = t::cpu();
  const int64_t m = 5, k = 12, n = 7;
  const auto xs = t::random_vec(m * k, 15), ws = t::random_vec(n * k, 16), bs = t::random_vec(n, 17),
             os = t::random_vec(m * n, 18);
  std::vector<double> want(static_cast<size_t>(m * n));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bs[j];
      for (int64_t e = 0; e < k; ++e) acc += double(xs[r * k + e]) * ws[j * k + e];
      want[r * n + j] = acc;
    }
  auto x = t::make(*be, Shape{m, k}, xs), w = t::make(*be, Shape{n, k}, ws), b = t::make(*be, Shape{n}, bs);
  auto out = t::make(*be, Shape{m, n}, os);
  be->gemm_bias(x, w, b, out, false);
  CHECK(t::max_err(t::get(*be, out), want) < 1e-5);
  for (size_t i = 0; i < want.size(); ++i) want[i] *= 2;
  be->gemm_bias(x, w, b, out, true);
  CHECK(t::max_err(t::get(*be, out), want) < 2e-5);
  auto short_b = t::zeros(*be, Shape{n - 1});
  CHECK_THROWS_WITH(be->gemm_bias(x, w, short_b, out, false), Contains("gemm_bias"));
}

TEST_CASE("vision plans refuse taps outside the table and tables of the wrong size", "[kernels]") {
  auto be = t::cpu();
  std::vector<int64_t> seg{2};
  std::vector<int32_t> idx{0, 1, 2, 9, 0, 0, 0, 0};
  std::vector<float> w(8, 0.25f), cs(8, 1.0f);
  VisionBatchDesc d;
  d.segments = seg;
  d.pos_index = idx;
  d.pos_weight = w;
  d.pos_table_rows = 9;
  d.rope_half = 4;
  d.rope_cos = cs;
  d.rope_sin = cs;
  CHECK_THROWS_WITH(be->plan_vision(d), Contains("outside the table"));
  idx[3] = 8;
  d.rope_half = 3;
  CHECK_THROWS_WITH(be->plan_vision(d), Contains("rotary tables"));
}

TEST_CASE("rope with M-RoPE positions: interleaved sections, given rows then position + delta", "[kernels]") {
  auto be = t::cpu();
  const int64_t heads = 2, d = 16, r = 12, half = 6;  // sections [2, 2, 2] over 6 frequencies
  const std::vector<int64_t> given = {4, 5, 6, 4, 5, 7, 4, 6, 6};  // 3 rows of (t, h, w)
  std::vector<int32_t> blocks{0, 1};
  const std::vector<int32_t> tokens(5, 0);
  ds::kernels::SequenceChunk a{
      .tokens = tokens, .n_cached = 3, .block_ids = blocks, .state_slot = 0, .mrope_positions = given, .rope_delta = -2};
  std::vector<int32_t> blocks2{2};
  ds::kernels::SequenceChunk b{.tokens = std::span(tokens).first(2), .n_cached = 0, .block_ids = blocks2,
                               .state_slot = 1};  // text: plain positions
  std::vector<ds::kernels::SequenceChunk> seqs{a, b};
  ds::kernels::BatchDesc desc;
  desc.seqs = seqs;
  desc.block_size = 8;
  desc.num_blocks = 3;
  desc.num_slots = 2;
  desc.vocab_size = 10;
  auto plan = be->plan(desc);
  REQUIRE(plan->has_mrope());
  // Rows 3 and 4 of a: positions 6 and 7 plus delta -2; b's rows: 0 and 1.
  const std::vector<int64_t> want_pos = {4, 5, 6, 4, 5, 7, 4, 6, 6, 4, 4, 4, 5, 5, 5, 0, 0, 0, 1, 1, 1};
  CHECK(plan->mrope_positions() == want_pos);
  const auto xs = t::random_vec(7 * heads * d, 13);
  // The float64 rotation by f32 angles of the given frequencies, cos and sin times `scale`.
  auto expected = [&](const std::vector<float>& inv, double scale) {
    std::vector<double> want(xs.begin(), xs.end());
    for (int64_t row = 0; row < 7; ++row)
      for (int64_t i = 0; i < half; ++i) {
        const int axis = (i % 3 == 1 && i < 6) ? 1 : (i % 3 == 2 && i < 6) ? 2 : 0;
        const float ang = static_cast<float>(want_pos[3 * row + axis]) * inv[static_cast<size_t>(i)];
        const double c = std::cos(ang) * scale, sn = std::sin(ang) * scale;
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t base = (row * heads + h) * d;
          const double x1 = xs[base + i], x2 = xs[base + i + half];
          want[base + i] = x1 * c - x2 * sn;
          want[base + i + half] = x2 * c + x1 * sn;
        }
      }
    return want;
  };
  std::vector<float> theta_inv;
  for (int64_t i = 0; i < half; ++i)
    theta_inv.push_back(1.0f / static_cast<float>(std::pow(1e4, static_cast<double>(static_cast<float>(2 * i) / r))));
  auto x = t::make(*be, Shape{7, heads, d}, xs);
  ds::kernels::RopeParams p(r, 1e4);
  p.mrope_section = {2, 2, 2};
  be->rope(x, *plan, p);
  CHECK(t::max_err(t::get(*be, x), expected(theta_inv, 1.0)) < 2e-6);
  // YaRN's frequencies and attention scaling (rope.h) under the same sections: each axis
  // rotates by the scaled table's frequency, the pair scaled.
  ds::kernels::RopeParams yarn = p;
  yarn.inv_freq = {1.0f, 0.3f, 0.09f, 0.01f, 0.004f, 0.0007f};
  yarn.attention_scaling = 1.1386294f;
  auto xy = t::make(*be, Shape{7, heads, d}, xs);
  be->rope(xy, *plan, yarn);
  CHECK(t::max_err(t::get(*be, xy), expected(yarn.inv_freq, 1.1386294f)) < 4e-6);
  ds::kernels::RopeParams plain(r, 1e4);
  CHECK_THROWS_WITH(be->rope(x, *plan, plain), Contains("mrope_section"));

  // A delta alone (an image prompt's decode) is no M-RoPE plan: one axis at position + delta,
  // the same rotation as three equal axes, while the cache positions stay as they are.
  ds::kernels::SequenceChunk c{
      .tokens = std::span(tokens).first(1), .n_cached = 9, .block_ids = blocks, .state_slot = 0, .rope_delta = -2};
  std::vector<ds::kernels::SequenceChunk> decode{c, b};
  desc.seqs = decode;
  auto plan2 = be->plan(desc);
  CHECK_FALSE(plan2->has_mrope());
  CHECK(plan2->positions() == std::vector<int64_t>{9, 0, 1});
  CHECK(plan2->rope_positions() == std::vector<int64_t>{7, 0, 1});
  const auto ys = t::random_vec(3 * heads * d, 14);
  auto y1 = t::make(*be, Shape{3, heads, d}, ys), y3 = t::make(*be, Shape{3, heads, d}, ys);
  be->rope(y1, *plan2, plain);
  std::vector<int64_t> three = {7, 7, 7};
  ds::kernels::SequenceChunk c3 = c;
  c3.mrope_positions = three;
  std::vector<ds::kernels::SequenceChunk> decode3{c3, b};
  desc.seqs = decode3;
  auto plan3 = be->plan(desc);
  REQUIRE(plan3->has_mrope());
  be->rope(y3, *plan3, p);
  CHECK(t::get(*be, y1) == t::get(*be, y3));
}
