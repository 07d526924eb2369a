// The DeltaNet kernels: causal conv1d with its conv state and the gated delta rule with its
// recurrent state, against float64 references of HF's recurrence, and the property the
// engine needs: a prefill chunk leaves bit-for-bit the state (and outputs) of feeding the
// same tokens one at a time, however the tokens are split.
#include <catch2/catch.hpp>

#include "kernels/common/half.h"
#include "tests/kernels_cpu/kernel_test_util.h"

using ds::kernels::DeltaNetDims;
using ds::kernels::Shape;
using ds::kernels::Tensor;
namespace t = ds::test;

namespace {

double silu(double x) { return x / (1 + std::exp(-x)); }

// Runs the conv over one sequence's tokens split into `chunks`, starting from state0; returns
// (outputs, final state of the slot's layer).
struct ConvRun {
  std::vector<float> out, state;
};

constexpr int64_t kC = 70, kKc = 4, kTaps = 3, kSlots = 2, kLayers = 3, kLayer = 1, kSlot = 1;

ConvRun run_conv(ds::kernels::Backend& be, const std::vector<float>& x, const std::vector<float>& w,
                 const std::vector<float>& state0, const std::vector<int64_t>& chunks) {
  auto state = t::make(be, Shape{kSlots, kLayers, kC, kTaps}, state0);
  auto wt = t::make(be, Shape{kC, 1, kKc}, w);
  ConvRun run;
  int64_t pos = 0;
  for (int64_t n : chunks) {
    auto plan = t::plan_of(be, {{n, pos, kSlot, {0, 1, 2, 3}}}, 4, 4, kSlots);
    auto xt = t::make(be, Shape{n, kC}, std::vector<float>(x.begin() + pos * kC, x.begin() + (pos + n) * kC));
    auto out = t::zeros(be, Shape{n, kC});
    be.causal_conv1d(xt, wt, state, kLayer, *plan, out);
    const auto o = t::get(be, out);
    run.out.insert(run.out.end(), o.begin(), o.end());
    pos += n;
  }
  const auto all = t::get(be, state);
  const int64_t at = (kSlot * kLayers + kLayer) * kC * kTaps;
  run.state.assign(all.begin() + at, all.begin() + at + kC * kTaps);
  // The other slot and layers are untouched.
  for (int64_t i = 0; i < static_cast<int64_t>(all.size()); ++i)
    if (i < at || i >= at + kC * kTaps) REQUIRE(all[i] == state0[i]);
  return run;
}

}  // namespace

TEST_CASE("causal conv1d: continues the conv state, equals the float64 reference, split-invariant", "[kernels]") {
  auto be = t::cpu();
  const int64_t n = 10;
  const auto x = t::random_vec(n * kC, 1);
  const auto w = t::random_vec(kC * kKc, 2, 0.5f);
  const auto state0 = t::random_vec(kSlots * kLayers * kC * kTaps, 3);

  const ConvRun whole = run_conv(*be, x, w, state0, {n});
  std::vector<double> want(n * kC);
  const int64_t at = (kSlot * kLayers + kLayer) * kC * kTaps;
  for (int64_t c = 0; c < kC; ++c) {
    std::vector<double> ext;
    for (int64_t j = 0; j < kTaps; ++j) ext.push_back(state0[at + c * kTaps + j]);
    for (int64_t i = 0; i < n; ++i) ext.push_back(x[i * kC + c]);
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t j = 0; j < kKc; ++j) s += double(w[c * kKc + j]) * ext[i + j];
      want[i * kC + c] = silu(s);
    }
    for (int64_t j = 0; j < kTaps; ++j) REQUIRE(whole.state[c * kTaps + j] == static_cast<float>(ext[n + j]));
  }
  CHECK(t::max_err(whole.out, want) < 1e-6);

  for (const auto& split : std::vector<std::vector<int64_t>>{{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 1, 6}, {2, 8}}) {
    const ConvRun r = run_conv(*be, x, w, state0, split);
    CHECK(r.out == whole.out);
    CHECK(r.state == whole.state);
  }
}

namespace {

constexpr int64_t kHk = 2, kHv = 4, kDk = 16, kDv = 8;
constexpr int64_t kConv = 2 * kHk * kDk + kHv * kDv;

struct RuleRun {
  std::vector<float> out, state;
};

// Two sequences (slots 1 and 0) advanced together, each split into its own chunks (same
// count; a 0 leaves that sequence out of the step).
RuleRun run_rule(ds::kernels::Backend& be, const std::vector<std::vector<float>>& qkv,
                 const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
                 const std::vector<float>& a_log, const std::vector<float>& dt_bias, const std::vector<float>& state0,
                 const std::vector<std::vector<int64_t>>& chunks) {
  auto state = be.alloc(be.recurrent_state_dtype(), Shape{2, 2, kHv, kDk, kDv});
  be.copy_from_host(state0, state);
  auto al = t::make(be, Shape{kHv}, a_log);
  auto dt = t::make(be, Shape{kHv}, dt_bias);
  const DeltaNetDims dims{kHk, kHv, kDk, kDv};
  std::vector<std::vector<float>> outs(2);
  std::vector<int64_t> pos(2, 0);
  for (size_t step = 0; step < chunks[0].size(); ++step) {
    std::vector<t::SeqDesc> desc;
    std::vector<float> xs, as, bs;
    for (size_t s = 0; s < 2; ++s) {
      const int64_t n = chunks[s][step], p = pos[s];
      if (n == 0) continue;
      desc.push_back({n, p, static_cast<int32_t>(1 - s), {static_cast<int32_t>(s)}});
      xs.insert(xs.end(), qkv[s].begin() + p * kConv, qkv[s].begin() + (p + n) * kConv);
      as.insert(as.end(), a[s].begin() + p * kHv, a[s].begin() + (p + n) * kHv);
      bs.insert(bs.end(), b[s].begin() + p * kHv, b[s].begin() + (p + n) * kHv);
    }
    auto plan = t::plan_of(be, desc, 64, 2, 2);
    const int64_t rows = plan->num_rows();
    auto xt = t::make(be, Shape{rows, kConv}, xs);
    auto at = t::make(be, Shape{rows, kHv}, as);
    auto bt = t::make(be, Shape{rows, kHv}, bs);
    auto out = t::zeros(be, Shape{rows, kHv, kDv});
    be.gated_delta_rule(xt, at, bt, al, dt, state, 1, *plan, dims, out);
    const auto o = t::get(be, out);
    const int64_t n0 = chunks[0][step];
    outs[0].insert(outs[0].end(), o.begin(), o.begin() + n0 * kHv * kDv);
    outs[1].insert(outs[1].end(), o.begin() + n0 * kHv * kDv, o.end());
    pos[0] += chunks[0][step];
    pos[1] += chunks[1][step];
  }
  RuleRun r;
  r.out = outs[0];
  r.out.insert(r.out.end(), outs[1].begin(), outs[1].end());
  r.state = t::get(be, state);
  return r;
}

// HF's torch_recurrent_gated_delta_rule for one sequence in float64, from state S (its
// [Hv, dk, dv] block), appending outputs.
void reference_rule(const std::vector<float>& qkv, const std::vector<float>& a, const std::vector<float>& b,
                    const std::vector<float>& a_log, const std::vector<float>& dt_bias, std::vector<double>& S,
                    std::vector<double>& out) {
  const int64_t n = static_cast<int64_t>(qkv.size()) / kConv;
  for (int64_t t0 = 0; t0 < n; ++t0) {
    const float* x = &qkv[t0 * kConv];
    for (int64_t j = 0; j < kHv; ++j) {
      const int64_t kh = j / (kHv / kHk);  // repeat_interleave grouping
      std::vector<double> q(kDk), k(kDk);
      double qs = 0, ks = 0;
      for (int64_t i = 0; i < kDk; ++i) {
        q[i] = x[kh * kDk + i];
        k[i] = x[kHk * kDk + kh * kDk + i];
        qs += q[i] * q[i];
        ks += k[i] * k[i];
      }
      for (int64_t i = 0; i < kDk; ++i) {
        q[i] = q[i] / std::sqrt(qs + 1e-6) / std::sqrt(double(kDk));
        k[i] = k[i] / std::sqrt(ks + 1e-6);
      }
      const double beta = 1 / (1 + std::exp(-double(b[t0 * kHv + j])));
      const double ax = double(a[t0 * kHv + j]) + dt_bias[j];
      const double g = -std::exp(double(a_log[j])) * (ax > 20 ? ax : std::log1p(std::exp(ax)));
      double* s = &S[j * kDk * kDv];
      for (int64_t i = 0; i < kDk * kDv; ++i) s[i] *= std::exp(g);
      for (int64_t c = 0; c < kDv; ++c) {
        double u = 0;
        for (int64_t r = 0; r < kDk; ++r) u += s[r * kDv + c] * k[r];
        const double delta = (x[2 * kHk * kDk + j * kDv + c] - u) * beta;
        for (int64_t r = 0; r < kDk; ++r) s[r * kDv + c] += k[r] * delta;
      }
      for (int64_t c = 0; c < kDv; ++c) {
        double o = 0;
        for (int64_t r = 0; r < kDk; ++r) o += s[r * kDv + c] * q[r];
        out.push_back(o);
      }
    }
  }
}

// Random qkv, a and b of two sequences of 9 and 4 tokens.
struct RuleInputs {
  std::vector<std::vector<float>> qkv, a, b;
};
RuleInputs rule_inputs(uint64_t seed) {
  const std::vector<int64_t> len = {9, 4};
  RuleInputs in;
  for (size_t s = 0; s < 2; ++s) {
    in.qkv.push_back(t::random_vec(len[s] * kConv, seed + s));
    in.a.push_back(t::random_vec(len[s] * kHv, seed + 10 + s, 2.0f));
    in.b.push_back(t::random_vec(len[s] * kHv, seed + 20 + s, 2.0f));
  }
  return in;
}

}  // namespace

TEST_CASE("gated delta rule: float64 recurrence, grouped heads, split-invariant state", "[kernels]") {
  auto be = t::cpu();
  auto [qkv, a, b] = rule_inputs(10);
  a[0][5] = 25.0f;  // softplus above its threshold of 20
  const std::vector<float> a_log = {-0.5f, 0.2f, 0.9f, -1.5f}, dt_bias = {0.3f, -0.2f, 1.0f, 0.0f};
  const auto state0 = t::random_vec(2 * 2 * kHv * kDk * kDv, 40, 0.3f);

  const RuleRun whole = run_rule(*be, qkv, a, b, a_log, dt_bias, state0, {{9}, {4}});

  // Reference: sequence 0 in slot 1, sequence 1 in slot 0, both in layer 1 of 2.
  std::vector<double> want_out;
  std::vector<double> want_state(state0.begin(), state0.end());
  const int64_t per = kHv * kDk * kDv;
  for (size_t s = 0; s < 2; ++s) {
    const int64_t at = ((1 - static_cast<int64_t>(s)) * 2 + 1) * per;
    std::vector<double> S(want_state.begin() + at, want_state.begin() + at + per);
    reference_rule(qkv[s], a[s], b[s], a_log, dt_bias, S, want_out);
    std::copy(S.begin(), S.end(), want_state.begin() + at);
  }
  CHECK(t::max_err(whole.out, want_out) < 1e-5);
  CHECK(t::max_err(whole.state, want_state) < 1e-5);

  for (const auto& split : std::vector<std::vector<std::vector<int64_t>>>{
           {{1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0, 0, 0}},
           {{4, 5}, {3, 1}},
           {{0, 1, 8}, {2, 2, 0}}}) {
    const RuleRun r = run_rule(*be, qkv, a, b, a_log, dt_bias, state0, split);
    CHECK(r.out == whole.out);
    CHECK(r.state == whole.state);
  }
}

TEST_CASE("gated delta rule: a bf16 state is the f32 step's, rounded once where the step stores it", "[kernels]") {
  auto f32 = t::cpu();
  auto bf16 = ds::kernels::cpu::make_cpu_backend({.num_threads = 2, .recurrent_state_dtype = ds::DType::bf16});
  const auto [qkv, a, b] = rule_inputs(50);
  const std::vector<float> a_log = {-0.5f, 0.2f, 0.9f, -1.5f}, dt_bias = {0.3f, -0.2f, 1.0f, 0.0f};
  auto state0 = t::random_vec(2 * 2 * kHv * kDk * kDv, 80, 0.3f);
  for (float& v : state0) v = ds::bf16_to_f32(ds::f32_to_bf16(v));  // what a bf16 slot holds exactly

  // One step: the same fp32 arithmetic from the same state, so the same outputs, and the state
  // the f32 step leaves rounded to bf16 (widened here for the comparison).
  const RuleRun want = run_rule(*f32, qkv, a, b, a_log, dt_bias, state0, {{9}, {4}});
  const RuleRun got = run_rule(*bf16, qkv, a, b, a_log, dt_bias, state0, {{9}, {4}});
  CHECK(got.out == want.out);
  std::vector<float> rounded = want.state;
  for (float& v : rounded) v = ds::bf16_to_f32(ds::f32_to_bf16(v));
  CHECK(got.state == rounded);
  CHECK(got.state != want.state);

  // Over several steps the roundings between them stay within bf16's precision of the f32 run.
  const RuleRun want_split = run_rule(*f32, qkv, a, b, a_log, dt_bias, state0, {{4, 5}, {3, 1}});
  const RuleRun got_split = run_rule(*bf16, qkv, a, b, a_log, dt_bias, state0, {{4, 5}, {3, 1}});
  double d = 0, r = 0;
  for (size_t i = 0; i < want_split.state.size(); ++i) {
    d += (got_split.state[i] - want_split.state[i]) * (got_split.state[i] - want_split.state[i]);
    r += want_split.state[i] * want_split.state[i];
  }
  CHECK(std::sqrt(d / r) < 8e-3);
  CHECK(t::max_err(got_split.out, std::vector<double>(want_split.out.begin(), want_split.out.end())) < 1e-2);
}
