// The CUDA backend's DeltaNet ops against the CPU backend: causal_conv1d and the gated delta
// rule (token by token, and chunked on the tensor cores or in fp32) continuing a state, over
// varlen batches and chunk boundaries, with f32 or bf16 recurrent states.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "kernels/common/half.h"
#include "kernels/common/quant.h"
#include "kernels/cuda/cuda_backend.h"
#include "model/qwen35/fp8.h"
#include "tests/kernels_cpu/kernel_test_util.h"
#include "tests/kernels_cuda/cuda_ops_pair.h"

using namespace ds;
using namespace ds::test::cuda_ops;
using test::SeqDesc;

namespace {

// The gated delta rule's tolerances against the CPU's fp32 token-by-token recurrence: the
// f32 reference mode runs the chunked form in fp32 (equal to fp32 rounding); production runs it
// on the tensor cores with bf16 operands (kernels/cuda/delta_rule_tc.cu), within bf16 rounding.
// Relative L2 error per sequence and of the states; and the worst single (token, head) row
// (scaled as check_delta_step says), which catches a wrong row at a chunk boundary that a
// sequence's L2 error would dilute. With a bf16 state on both sides (each rounds it where a
// step stores it), the rounding of values that differ by fp32 noise can fall either way: the
// production tolerances then hold in both modes.
struct DeltaTolerance {
  double seq, state, row;
};
DeltaTolerance delta_tolerance(bool f32_weights, DType state) {
  return f32_weights && state == DType::f32 ? DeltaTolerance{1e-4, 1e-4, 1e-3} : DeltaTolerance{1e-2, 1e-2, 5e-2};
}

// One gated_delta_rule step of `step` on both backends from the states they hold, checked
// sequence by sequence, row by row and on the states; also that slot `untouched` (in no
// sequence) keeps `state0`.
void check_delta_step(Pair& p, const kernels::DeltaNetDims& dims, const std::vector<SeqDesc>& step, int64_t layer,
                      int32_t slots, const Tensor& alc, const Tensor& alg, const Tensor& dtc, const Tensor& dtg,
                      Tensor& rsc, Tensor& rsg, const std::vector<float>& qkv, uint64_t seed, bool f32_weights,
                      int32_t untouched, const std::vector<float>& state0) {
  const DeltaTolerance tol = delta_tolerance(f32_weights, rsg.dtype());
  const std::string mode = std::string(f32_weights ? "fp32 chunks" : "tensor-core chunks") +
                           (rsg.dtype() == DType::bf16 ? ", bf16 state" : "");
  const int64_t C = dims.conv_dim(), hv = dims.v_heads, dv = dims.v_dim;
  int64_t T = 0;
  for (const auto& s : step) T += s.n_tokens;
  auto pc = test::plan_of(*p.cpu, step, 16, 400, slots);
  auto pg = test::plan_of(*p.gpu, step, 16, 400, slots);
  const auto av = test::random_vec(static_cast<size_t>(T * hv), seed + 1);
  const auto bv = test::random_vec(static_cast<size_t>(T * hv), seed + 2);
  Tensor xc = test::make(*p.cpu, {T, C}, qkv), xg = act(*p.gpu, DType::f32, {T, C}, qkv);
  Tensor ac = test::make(*p.cpu, {T, hv}, av), ag = act(*p.gpu, DType::f32, {T, hv}, av);
  Tensor bc = test::make(*p.cpu, {T, hv}, bv), bg = act(*p.gpu, DType::f32, {T, hv}, bv);
  Tensor oc = p.cpu->alloc(DType::f32, {T, hv, dv}), og = poisoned(*p.gpu, DType::f32, {T, hv, dv});
  p.cpu->gated_delta_rule(xc, ac, bc, alc, dtc, rsc, layer, *pc, dims, oc);
  p.gpu->gated_delta_rule(xg, ag, bg, alg, dtg, rsg, layer, *pg, dims, og);
  const auto want = test::get(*p.cpu, oc), got = test::get(*p.gpu, og);
  int64_t row = 0;
  for (const auto& s : step) {
    const auto b = static_cast<size_t>(row * hv * dv), e = b + static_cast<size_t>(s.n_tokens * hv * dv);
    const std::vector<float> g(got.begin() + b, got.begin() + e), w(want.begin() + b, want.begin() + e);
    // A row's error is scaled by the larger of its own norm and the sequence's mean row norm:
    // rows near zero (a query almost orthogonal to the few keys a strong decay leaves) carry
    // bf16's absolute error, large relative to themselves and harmless (a GPU run measured
    // 0.68 of a row 1/40 of the mean); a wrong row errs by the size of a typical row.
    const auto row_norm = [](const std::vector<float>& x, size_t b, int64_t n) {
      double acc = 0;
      for (size_t i = b; i < b + static_cast<size_t>(n); ++i) acc += static_cast<double>(x[i]) * x[i];
      return std::sqrt(acc);
    };
    double mean_norm = 0;
    for (int64_t r = 0; r < s.n_tokens * hv; ++r) mean_norm += row_norm(w, static_cast<size_t>(r * dv), dv);
    mean_norm /= static_cast<double>(std::max<int64_t>(s.n_tokens * hv, 1));
    double worst = 0;
    int64_t worst_at = -1;
    for (int64_t r = 0; r < s.n_tokens * hv; ++r) {
      const auto rb = static_cast<size_t>(r * dv);
      std::vector<float> diff(static_cast<size_t>(dv));
      for (int64_t i = 0; i < dv; ++i) diff[static_cast<size_t>(i)] = g[rb + static_cast<size_t>(i)] - w[rb + static_cast<size_t>(i)];
      const double err = row_norm(diff, 0, dv) / std::max({row_norm(w, rb, dv), mean_norm, 1e-30});
      if (!(err <= worst)) worst = err, worst_at = r;
    }
    const double seq_err = rel(g, w);
    // Printed so a run on the GPU machine shows the margins (the tolerances are estimates).
    std::printf("gated_delta_rule %s, %lld/%lld heads, %lld tokens: sequence rel %.2e, worst row (scaled) %.2e (token %lld)\n",
                mode.c_str(), static_cast<long long>(dims.k_heads), static_cast<long long>(hv), static_cast<long long>(s.n_tokens),
                seq_err, worst, static_cast<long long>(worst_at < 0 ? -1 : worst_at / hv));
    INFO("sequence of " << s.n_tokens << " tokens after " << s.n_cached << " (" << hv << " value heads)");
    CHECK(seq_err < tol.seq);
    INFO("worst row: token " << (worst_at < 0 ? -1 : worst_at / hv) << " head " << (worst_at < 0 ? -1 : worst_at % hv));
    CHECK(worst < tol.row);
    row += s.n_tokens;
  }
  const auto state_c = test::get(*p.cpu, rsc), state_g = test::get(*p.gpu, rsg);
  const double state_err = rel(state_g, state_c);
  std::printf("gated_delta_rule %s, %lld/%lld heads: states rel %.2e\n", mode.c_str(), static_cast<long long>(dims.k_heads),
              static_cast<long long>(hv), state_err);
  CHECK(state_err < tol.state);
  const size_t per_slot = state_g.size() / static_cast<size_t>(slots);
  CHECK(std::equal(state_g.begin() + untouched * per_slot, state_g.begin() + (untouched + 1) * per_slot,
                   state0.begin() + untouched * per_slot));
}

}  // namespace

TEST_CASE("cuda ops: causal_conv1d and gated_delta_rule (recurrent and chunked) continue a state, f32 or bf16",
          "[cuda_ops][gpu]") {
  for (const auto& [f32w, state_type] : {std::pair{true, DType::f32}, std::pair{false, DType::f32},
                                         std::pair{true, DType::bf16}, std::pair{false, DType::bf16}}) {
    INFO((f32w ? "f32 reference mode (fp32 chunks)" : "production mode (tensor-core chunks)")
         << ", recurrent state " << dtype_name(state_type));
    Pair p(f32w, DType::bf16, true, cuda::CudaBackendOptions{}.paths.fp8_skinny_rows, state_type);
    const kernels::DeltaNetDims dims{2, 4, 128, 128};
    const int64_t C = dims.conv_dim(), hv = dims.v_heads, kc = 4, slots = 10, layers = 2, layer = 1;
    // Two steps over the same slots: sequence lengths cover the recurrent path (1, 5 tokens) and
    // the chunked one (64, 150 = 64 + 64 + 22, 65), starting from random states. Snapshot rows
    // (slots 6-9; prefix caching) on both paths: after rows 37 and 100 of 150 (chunk items 38,
    // 63, 49), row 2 of 5, row 63 of 65 (items 64, 1), row 15 of 130, row 10 of 20 (items 11, 9).
    const std::vector<std::vector<SeqDesc>> steps = {
        with_blocks({{1, 10, 0, {}}, {150, 0, 1, {}, {}, {{37, 6}, {100, 9}}}, {5, 3, 2, {}, {}, {{2, 7}}}, {64, 0, 3, {}},
                     {65, 7, 5, {}, {}, {{63, 8}}}},
                    16, 200, 1),
        with_blocks({{1, 11, 0, {}}, {1, 150, 1, {}}, {20, 8, 2, {}, {}, {{10, 7}}}, {130, 64, 3, {}, {}, {{15, 6}}},
                     {9, 72, 5, {}}},
                    16, 200, 2)};
    const auto w = test::random_vec(static_cast<size_t>(C * kc), 60, 0.5f);
    const Shape cs{slots, layers, C, kc - 1}, rs{slots, layers, hv, 128, 128};
    const auto conv0 = test::random_vec(static_cast<size_t>(cs.numel()), 61);
    // bf16-exact, so the slot no sequence touches keeps it exactly in either type.
    const auto rec0 = bf16_exact(test::random_vec(static_cast<size_t>(rs.numel()), 62, 0.05f));
    std::vector<float> a_log(static_cast<size_t>(hv)), dt(static_cast<size_t>(hv));
    for (int64_t j = 0; j < hv; ++j) {
      a_log[static_cast<size_t>(j)] = std::log(1.0f + 3.0f * static_cast<float>(j));
      dt[static_cast<size_t>(j)] = -0.5f + 0.3f * static_cast<float>(j);
    }
    Tensor wc = p.cpu->upload({DType::f32, Shape{C, 1, kc}, w.data()}), wg = p.gpu->upload({DType::f32, Shape{C, 1, kc}, w.data()});
    Tensor alc = p.cpu->upload({DType::f32, Shape{hv}, a_log.data()}), alg = p.gpu->upload({DType::f32, Shape{hv}, a_log.data()});
    Tensor dtc = p.cpu->upload({DType::f32, Shape{hv}, dt.data()}), dtg = p.gpu->upload({DType::f32, Shape{hv}, dt.data()});
    Tensor csc = test::make(*p.cpu, cs, conv0), csg = act(*p.gpu, DType::f32, cs, conv0);
    Tensor rsc = act(*p.cpu, state_type, rs, rec0), rsg = act(*p.gpu, state_type, rs, rec0);
    uint64_t seed = 70;
    for (const auto& step : steps) {
      int64_t T = 0;
      for (const auto& s : step) T += s.n_tokens;
      auto pc = test::plan_of(*p.cpu, step, 16, 200, static_cast<int32_t>(slots));
      auto pg = test::plan_of(*p.gpu, step, 16, 200, static_cast<int32_t>(slots));
      const auto x = test::random_vec(static_cast<size_t>(T * C), ++seed);
      Tensor xc = test::make(*p.cpu, {T, C}, x), xg = act(*p.gpu, DType::f32, {T, C}, x);
      Tensor cc = p.cpu->alloc(DType::f32, {T, C}), cg = poisoned(*p.gpu, DType::f32, {T, C});
      p.cpu->causal_conv1d(xc, wc, csc, layer, *pc, cc);
      p.gpu->causal_conv1d(xg, wg, csg, layer, *pg, cg);
      const auto conv_out = test::get(*p.cpu, cc);
      CHECK(rel(test::get(*p.gpu, cg), conv_out) < 1e-6);
      CHECK(rel(test::get(*p.gpu, csg), test::get(*p.cpu, csc)) < 1e-7);
      // The same input on both sides: the CPU's conv output.
      check_delta_step(p, dims, step, layer, static_cast<int32_t>(slots), alc, alg, dtc, dtg, rsc, rsg, conv_out,
                       seed += 2, f32w, 4, rec0);
    }
  }
}

TEST_CASE("cuda ops: gated_delta_rule chunks (tensor cores and fp32) over varlen batches, chunk boundaries, "
          "continued states and the 9B / 27B head ratios", "[cuda_ops][gpu]") {
  // Chunk lengths around the 64-token boundary (9: the shortest chunked sequence; 63, 64, 65,
  // 128, 129), a long one (300 = 4 x 64 + 44), a decode row and a recurrent-path short prompt
  // beside them, from random states; the second step continues every slot.
  const std::vector<std::vector<SeqDesc>> steps = {
      with_blocks({{1, 40, 0, {}}, {9, 0, 1, {}}, {63, 0, 2, {}}, {64, 17, 3, {}}, {65, 0, 4, {}}, {300, 5, 5, {}}, {6, 0, 7, {}}},
                  16, 400, 3),
      with_blocks({{1, 41, 0, {}}, {129, 9, 1, {}}, {128, 63, 2, {}}, {65, 81, 3, {}}, {64, 65, 4, {}}, {10, 305, 5, {}},
                   {200, 6, 7, {}}},
                  16, 400, 4)};
  const int32_t slots = 8, untouched = 6;
  const int64_t layers = 2, layer = 0;
  // Value heads per key head 2 (Qwen3.5-9B: 16 / 32) and 3 (27B: 16 / 48), on fewer heads.
  for (const kernels::DeltaNetDims dims : {kernels::DeltaNetDims{2, 4, 128, 128}, kernels::DeltaNetDims{2, 6, 128, 128}}) {
    for (bool f32w : {false, true}) {
      INFO((f32w ? "f32 reference mode (fp32 chunks)" : "production mode (tensor-core chunks)") << ", " << dims.k_heads
                                                                                               << "/" << dims.v_heads
                                                                                               << " heads");
      Pair p(f32w);
      const int64_t C = dims.conv_dim(), hv = dims.v_heads;
      const Shape rs{slots, layers, hv, 128, 128};
      const auto rec0 = test::random_vec(static_cast<size_t>(rs.numel()), 90, 0.05f);
      std::vector<float> a_log(static_cast<size_t>(hv)), dt(static_cast<size_t>(hv));
      for (int64_t j = 0; j < hv; ++j) {
        // Decays from mild to strong (e^g down to ~0.05 a token), as trained heads have.
        a_log[static_cast<size_t>(j)] = std::log(0.05f + 0.6f * static_cast<float>(j));
        dt[static_cast<size_t>(j)] = -1.0f + 0.4f * static_cast<float>(j);
      }
      Tensor alc = p.cpu->upload({DType::f32, Shape{hv}, a_log.data()}), alg = p.gpu->upload({DType::f32, Shape{hv}, a_log.data()});
      Tensor dtc = p.cpu->upload({DType::f32, Shape{hv}, dt.data()}), dtg = p.gpu->upload({DType::f32, Shape{hv}, dt.data()});
      Tensor rsc = test::make(*p.cpu, rs, rec0), rsg = act(*p.gpu, DType::f32, rs, rec0);
      uint64_t seed = 100;
      for (const auto& step : steps) {
        int64_t T = 0;
        for (const auto& s : step) T += s.n_tokens;
        const auto qkv = test::random_vec(static_cast<size_t>(T * C), seed++);
        check_delta_step(p, dims, step, layer, slots, alc, alg, dtc, dtg, rsc, rsg, qkv, seed += 3, f32w, untouched,
                         rec0);
      }
    }
  }
}
