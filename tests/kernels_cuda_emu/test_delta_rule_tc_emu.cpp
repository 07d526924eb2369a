// The tensor-core chunked delta rule (kernels/cuda/delta_rule_tc.cu), its own source run on
// the CPU through an emulation of ldmatrix / mma.sync / shuffles / barriers (gpu_emu.h),
// against the CPU backend's token-by-token recurrence: the fragment layouts, tile offsets,
// masks, chunk boundaries and scratch layouts are checked without a GPU (timing and races
// are not: the GPU tests in tests/kernels_cuda run the real thing).
#include "tests/kernels_cuda_emu/gpu_emu.h"

// The storage the kernels' `extern __shared__ uint8_t smem[]` declarations name: in the
// kernels' own (unnamed) namespace, so those block-scope declarations find it.
namespace ds::cuda::ops::delta {
namespace {
alignas(16) uint8_t smem[emu::kSmemBytes];
}  // namespace
}  // namespace ds::cuda::ops::delta

#include "kernels/cuda/delta_rule_tc.cu"

#include <catch2/catch.hpp>

#include <cstdio>

#include "kernels/common/half.h"
#include "tests/kernels_cpu/kernel_test_util.h"

using namespace ds;

namespace {

double rel(const float* a, const float* b, size_t n) {
  double d = 0, r = 0;
  for (size_t i = 0; i < n; ++i) {
    const double e = static_cast<double>(a[i]) - b[i];
    d += e * e;
    r += static_cast<double>(b[i]) * b[i];
  }
  return std::isnan(d) ? INFINITY : std::sqrt(d / std::max(r, 1e-30));
}

double norm(const float* a, size_t n) {
  double r = 0;
  for (size_t i = 0; i < n; ++i) r += static_cast<double>(a[i]) * a[i];
  return std::sqrt(r);
}

double mean_row_norm(const float* a, int64_t rows, int64_t d) {
  double s = 0;
  for (int64_t r = 0; r < rows; ++r) s += norm(a + r * d, static_cast<size_t>(d));
  return s / static_cast<double>(std::max<int64_t>(rows, 1));
}

double row_error(const float* got, const float* want, int64_t d, double mean_norm) {
  double e = 0;
  for (int64_t i = 0; i < d; ++i) e += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
  const double scale = std::max(norm(want, static_cast<size_t>(d)), mean_norm);
  return std::isnan(e) ? INFINITY : std::sqrt(e) / std::max(scale, 1e-30);
}

// Sequences of `lens` tokens (slot i each) from random states, one step, emulated kernels vs
// the CPU backend; checks each sequence's output, its worst (token, head) row and the states.
// snapshots[i] >= 0: sequence i also leaves the state after that row in slot lens.size() + i
// (and, with second[i] >= 0, after that later row in slot 2 lens.size() + 1 + i).
// n_sms: the SM count the launch is told (it picks the scan's form). state_type: the slots'
// element type on both sides (f32 or bf16, Backend::recurrent_state_dtype).
void check_emulated_once(int64_t hk, int64_t hv, const std::vector<int64_t>& lens, uint64_t seed, bool strong_decays,
                         const std::vector<int64_t>& snapshots, const std::vector<int64_t>& second, int32_t n_sms,
                         DType state_type) {
  emu::shared_mem = ds::cuda::ops::delta::smem;
  constexpr int64_t D = 128;
  const int64_t C = 2 * hk * D + hv * D, slots = 3 * static_cast<int64_t>(lens.size()) + 2, layers = 1;
  const auto n_seqs = static_cast<int32_t>(lens.size());
  auto snapshot_row = [&](size_t i) { return i < snapshots.size() ? snapshots[i] : int64_t{-1}; };
  auto second_row = [&](size_t i) { return i < second.size() ? second[i] : int64_t{-1}; };
  auto rows_of = [&](size_t i) {
    std::vector<kernels::SnapshotRow> r;
    if (snapshot_row(i) >= 0) r.push_back({snapshot_row(i), n_seqs + static_cast<int32_t>(i)});
    if (second_row(i) >= 0) r.push_back({second_row(i), 2 * n_seqs + 1 + static_cast<int32_t>(i)});
    return r;
  };
  int64_t T = 0;
  for (int64_t n : lens) T += n;
  const auto qkv = test::random_vec(static_cast<size_t>(T * C), seed);
  const auto av = test::random_vec(static_cast<size_t>(T * hv), seed + 1);
  const auto bv = test::random_vec(static_cast<size_t>(T * hv), seed + 2);
  // bf16-exact, so either slot type holds it exactly.
  auto state0 = test::random_vec(static_cast<size_t>(slots * layers * hv * D * D), seed + 3, 0.05f);
  for (float& v : state0) v = bf16_to_f32(f32_to_bf16(v));
  std::vector<float> a_log(static_cast<size_t>(hv)), dt(static_cast<size_t>(hv));
  for (int64_t j = 0; j < hv; ++j) {
    a_log[static_cast<size_t>(j)] = strong_decays ? std::log(1.0f + 3.0f * static_cast<float>(j))
                                                  : std::log(0.05f + 0.6f * static_cast<float>(j));
    dt[static_cast<size_t>(j)] = strong_decays ? -0.5f + 0.3f * static_cast<float>(j) : -1.0f + 0.4f * static_cast<float>(j);
  }

  // The CPU backend, token by token.
  auto cpu = kernels::cpu::make_cpu_backend({.num_threads = 2, .recurrent_state_dtype = state_type});
  std::vector<test::SeqDesc> seqs;
  for (size_t i = 0; i < lens.size(); ++i)
    seqs.push_back({lens[i], 3, static_cast<int32_t>(i), {}, {}, rows_of(i)});
  for (auto& s : seqs)
    for (int64_t b = 0; b < (s.n_cached + s.n_tokens + 15) / 16; ++b) s.blocks.push_back(static_cast<int32_t>(100 * s.slot + b));
  auto plan = test::plan_of(*cpu, seqs, 16, 1000, static_cast<int32_t>(slots));
  const kernels::DeltaNetDims dims{hk, hv, D, D};
  kernels::Tensor x = test::make(*cpu, {T, C}, qkv), a = test::make(*cpu, {T, hv}, av), b = test::make(*cpu, {T, hv}, bv);
  kernels::Tensor al = test::make(*cpu, {hv}, a_log), dtb = test::make(*cpu, {hv}, dt);
  kernels::Tensor rs = cpu->alloc(state_type, {slots, layers, hv, D, D}), out = cpu->alloc(DType::f32, {T, hv, D});
  cpu->copy_from_host(state0, rs);
  cpu->gated_delta_rule(x, a, b, al, dtb, rs, 0, *plan, dims, out);
  const auto want = test::get(*cpu, out), want_state = test::get(*cpu, rs);

  // The emulated kernels on the same data, through the plan the CUDA backend builds.
  std::vector<cuda::ops::DevSeq> dseqs;
  std::vector<cuda::ops::DeltaNetChunkItem> items;
  std::vector<cuda::ops::DeltaNetChunkSeq> cseqs;
  int32_t row = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    const auto s = static_cast<int32_t>(i);
    std::vector<cuda::ops::DevSnapshot> snaps;
    for (const auto& sr : rows_of(i)) snaps.push_back({static_cast<int32_t>(sr.row), sr.slot});
    dseqs.push_back({row, static_cast<int32_t>(lens[i]), 3, s, 0, 0});
    cseqs.push_back(cuda::ops::append_chunk_items(items, s, row, static_cast<int32_t>(lens[i]), snaps.data(),
                                                  static_cast<int32_t>(snaps.size())));
    row += static_cast<int32_t>(lens[i]);
  }
  std::vector<float> state = state0, got(static_cast<size_t>(T * hv * D), -12345.0f);
  std::vector<uint16_t> state_bits(state0.size());  // the slots when bf16
  for (size_t i = 0; i < state0.size(); ++i) state_bits[i] = f32_to_bf16(state0[i]);
  std::vector<float> scratch(items.size() * static_cast<size_t>(hv * cuda::ops::kDeltaNetScratchFloats), NAN);
  cuda::ops::DeltaNetArgs g{};
  g.qkv = qkv.data();
  g.a = av.data();
  g.b = bv.data();
  g.a_log = a_log.data();
  g.dt_bias = dt.data();
  g.state = state_type == DType::bf16 ? static_cast<void*>(state_bits.data()) : state.data();
  g.state_type = state_type;
  g.out = got.data();
  g.n_layers = layers;
  g.layer = 0;
  g.k_heads = static_cast<int32_t>(hk);
  g.v_heads = static_cast<int32_t>(hv);
  g.k_dim = g.v_dim = static_cast<int32_t>(D);
  g.seqs = dseqs.data();
  g.row_state_slots = nullptr;
  cuda::ops::delta::deltanet_chunked_tc(g, items.data(), static_cast<int32_t>(items.size()), cseqs.data(),
                                        static_cast<int32_t>(cseqs.size()), scratch.data(), n_sms, {});
  if (state_type == DType::bf16)
    for (size_t i = 0; i < state.size(); ++i) state[i] = bf16_to_f32(state_bits[i]);

  int64_t at = 0;
  for (int64_t n : lens) {
    const size_t b0 = static_cast<size_t>(at * hv * D), len = static_cast<size_t>(n * hv * D);
    double worst = 0;
    // A row's error is scaled by the larger of its own norm and the sequence's mean row norm:
    // rows near zero (a query almost orthogonal to the few keys a strong decay leaves) carry
    // bf16's absolute error, which is large relative to themselves and harmless; a wrong row has
    // an error of the size of a typical row.
    const double mean = mean_row_norm(want.data() + b0, n * hv, D);
    for (int64_t r = 0; r < n * hv; ++r)
      worst = std::max(worst, row_error(got.data() + b0 + r * D, want.data() + b0 + r * D, D, mean));
    const double seq = rel(got.data() + b0, want.data() + b0, len);
    std::printf("emulated tensor-core delta rule, %lld/%lld heads, %lld tokens: sequence rel %.2e, worst row (scaled) %.2e\n",
                static_cast<long long>(hk), static_cast<long long>(hv), static_cast<long long>(n), seq, worst);
    INFO(n << " tokens, " << hk << "/" << hv << " heads");
    CHECK(seq < 1e-2);
    CHECK(worst < 5e-2);
    at += n;
  }
  const double st = rel(state.data(), want_state.data(), state.size());
  std::printf("emulated tensor-core delta rule, %lld/%lld heads: states rel %.2e\n", static_cast<long long>(hk),
              static_cast<long long>(hv), st);
  CHECK(st < 1e-2);
  const size_t per = state.size() / static_cast<size_t>(slots);
  for (size_t i = 0; i < lens.size(); ++i) {
    for (const auto& sr : rows_of(i)) {
      const size_t at_slot = static_cast<size_t>(sr.slot) * per;
      INFO("snapshot of sequence " << i << " after row " << sr.row);
      CHECK(rel(state.data() + at_slot, want_state.data() + at_slot, per) < 1e-2);
      CHECK(!std::equal(state.begin() + static_cast<std::ptrdiff_t>(at_slot),
                        state.begin() + static_cast<std::ptrdiff_t>(at_slot + per),
                        state0.begin() + static_cast<std::ptrdiff_t>(at_slot)));
    }
  }
  // The last slot is in no sequence.
  CHECK(std::equal(state.end() - static_cast<std::ptrdiff_t>(per), state.end(), state0.end() - static_cast<std::ptrdiff_t>(per)));
}

// Every form of the scan, by the SM count the launch is told: the one that also computes the
// output with 32 columns a block (four blocks a head fit the SMs), with 64 (two fit), and the
// one followed by the output kernel (they do not).
void check_emulated(int64_t hk, int64_t hv, const std::vector<int64_t>& lens, uint64_t seed, bool strong_decays = false,
                    const std::vector<int64_t>& snapshots = {}, const std::vector<int64_t>& second = {},
                    DType state_type = DType::f32) {
  const auto heads = static_cast<int32_t>(hv * static_cast<int64_t>(lens.size()));
  const struct {
    int32_t sms;
    const char* what;
  } forms[] = {{4 * heads, "with the output folded in, 32 columns a block"},
               {2 * heads, "with the output folded in, 64 columns a block"},
               {2 * heads - 1, "then the output kernel"}};
  for (const auto& f : forms) {
    std::printf("scan %s:\n", f.what);
    INFO(f.what);
    check_emulated_once(hk, hv, lens, seed, strong_decays, snapshots, second, f.sms, state_type);
  }
}

}  // namespace

TEST_CASE("emulated tensor-core delta rule: two value heads per key head, chunk boundaries", "[delta_tc_emu]") {
  check_emulated(1, 2, {150, 9, 64}, 11);
}

TEST_CASE("emulated tensor-core delta rule: three value heads per key head", "[delta_tc_emu]") {
  check_emulated(1, 3, {65, 20}, 12);
}

TEST_CASE("emulated tensor-core delta rule: strong decays leave rows near zero (the GPU op test's gates)",
          "[delta_tc_emu]") {
  check_emulated(1, 3, {150, 65}, 14, true);
}

TEST_CASE("emulated tensor-core delta rule: asynchronous copies land as late as a GPU may land them",
          "[delta_tc_emu]") {
  emu::late_copies = true;
  check_emulated(1, 2, {200, 30}, 13);
  emu::late_copies = false;
}

TEST_CASE("emulated tensor-core delta rule: snapshot rows split the chunks and leave the state there",
          "[delta_tc_emu]") {
  // 150 tokens with snapshots after rows 37 and 101: items of 38, 64, 48; 70 after row 63: 64,
  // 6; 20 after rows 0 and 17: items of 1, 17 and 2.
  check_emulated(1, 2, {150, 70, 20}, 17, false, {37, 63, 0}, {101, -1, 17});
}

TEST_CASE("emulated tensor-core delta rule: a bf16 state, rounded where the scan stores it (end, snapshots)",
          "[delta_tc_emu]") {
  check_emulated(1, 2, {150, 70, 20}, 18, false, {37, 63, 0}, {101, -1, 17}, DType::bf16);
}

TEST_CASE("emulated tensor-core delta rule: twelve value heads per key head (two prepare blocks of six)",
          "[delta_tc_emu]") {
  check_emulated(1, 12, {70}, 16);
}
