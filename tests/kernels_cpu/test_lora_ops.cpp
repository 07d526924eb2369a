// lora_shrink / lora_expand (kernels/backend.h) on the CPU backend against a float64 reference of
// y += B[slot] (A[slot] x) per row, on a batch that mixes slots and rows without one, an expand
// into a column range of a wider output, an expand from a rank range of a wider shrink output
// (the shrink a group of projections shares, model/qwen35/lora_slots.h), the grouped expand of
// several such projections against their expands one by one (bit for bit), and the contract's
// refusals.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/kernels_cpu/kernel_test_util.h"

using namespace ds;
using kernels::Shape;
using kernels::Tensor;

TEST_CASE("lora shrink and expand apply each row's slot and leave other rows alone", "[kernels][lora]") {
  auto be = kernels::cpu::make_cpu_backend({.num_threads = 2});
  const int64_t S = 3, R = 5, K = 37, N = 29, ld = 50, off = 11;
  // Sequences of 3, 1 and 4 rows on slots 2, none and 0.
  const std::vector<test::SeqDesc> seqs = {{.n_tokens = 3, .n_cached = 0, .slot = 0, .blocks = {0}, .lora_slot = 2},
                                           {.n_tokens = 1, .n_cached = 0, .slot = 1, .blocks = {1}},
                                           {.n_tokens = 4, .n_cached = 0, .slot = 2, .blocks = {2}, .lora_slot = 0}};
  auto plan = test::plan_of(*be, seqs, 16, 4, 4);
  const int64_t rows = plan->num_rows();
  const auto a = test::random_vec(static_cast<size_t>(S * R * K), 1, 0.3f);
  const auto b = test::random_vec(static_cast<size_t>(S * N * R), 2, 0.3f);
  const auto x = test::random_vec(static_cast<size_t>(rows * K), 3);
  const auto y0 = test::random_vec(static_cast<size_t>(rows * ld), 4);
  auto at = test::make(*be, Shape{S, R, K}, a), bt = test::make(*be, Shape{S, N, R}, b);
  auto xt = test::make(*be, Shape{rows, K}, x), yt = test::make(*be, Shape{rows, ld}, y0);
  auto tmp = test::make(*be, Shape{rows, R}, std::vector<float>(static_cast<size_t>(rows * R), 7.0f));
  be->lora_shrink(xt, at, *plan, tmp);
  be->lora_expand(tmp, 0, bt, *plan, off, yt);
  const auto y = test::get(*be, yt);
  const int32_t slot_of_row[] = {2, 2, 2, -1, 0, 0, 0, 0};
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ld; ++c) {
      double want = y0[static_cast<size_t>(r * ld + c)];
      const int32_t s = slot_of_row[r];
      if (s >= 0 && c >= off && c < off + N)
        for (int64_t i = 0; i < R; ++i) {
          double t = 0;
          for (int64_t k = 0; k < K; ++k) t += double(a[static_cast<size_t>((s * R + i) * K + k)]) * x[static_cast<size_t>(r * K + k)];
          want += double(b[static_cast<size_t>((s * N + (c - off)) * R + i)]) * t;
        }
      worst = std::max(worst, std::abs(want - y[static_cast<size_t>(r * ld + c)]));
      if (s < 0 || c < off || c >= off + N) REQUIRE(y[static_cast<size_t>(r * ld + c)] == y0[static_cast<size_t>(r * ld + c)]);
    }
  CHECK(worst < 1e-4);
  // The row without a slot is left as it was.
  const auto t = test::get(*be, tmp);
  for (int64_t i = 0; i < R; ++i) CHECK(t[static_cast<size_t>(3 * R + i)] == 7.0f);

  SECTION("the contract refuses slots outside the pool and mis-shaped operands") {
    auto small = test::make(*be, Shape{2, R, K}, std::vector<float>(static_cast<size_t>(2 * R * K)));
    CHECK_THROWS_AS(be->lora_shrink(xt, small, *plan, tmp), std::invalid_argument);
    auto wide = be->alloc(DType::f32, Shape{rows, N + off - 1});
    CHECK_THROWS_AS(be->lora_expand(tmp, 0, bt, *plan, off, wide), std::invalid_argument);
    auto bad_tmp = be->alloc(DType::f32, Shape{rows, R + 1});
    CHECK_THROWS_AS(be->lora_shrink(xt, at, *plan, bad_tmp), std::invalid_argument);
  }
}

TEST_CASE("lora expand reads its ranks from a column range of a wider shrink output", "[kernels][lora]") {
  // A group's stacked A of W ranks; the site expanded here owns ranks [first, first + R) of it.
  auto be = kernels::cpu::make_cpu_backend({.num_threads = 2});
  const int64_t S = 3, W = 13, first = 5, R = 6, K = 41, N = 23, ld = 30, off = 4;
  const std::vector<test::SeqDesc> seqs = {{.n_tokens = 2, .n_cached = 0, .slot = 0, .blocks = {0}, .lora_slot = 1},
                                           {.n_tokens = 1, .n_cached = 0, .slot = 1, .blocks = {1}},
                                           {.n_tokens = 3, .n_cached = 0, .slot = 2, .blocks = {2}, .lora_slot = 2}};
  auto plan = test::plan_of(*be, seqs, 16, 4, 4);
  const int64_t rows = plan->num_rows();
  const int32_t slot_of_row[] = {1, 1, -1, 2, 2, 2};
  const auto a = test::random_vec(static_cast<size_t>(S * W * K), 5, 0.3f);
  const auto b = test::random_vec(static_cast<size_t>(S * N * R), 6, 0.3f);
  const auto x = test::random_vec(static_cast<size_t>(rows * K), 7);
  const auto y0 = test::random_vec(static_cast<size_t>(rows * ld), 8);
  auto at = test::make(*be, Shape{S, W, K}, a), bt = test::make(*be, Shape{S, N, R}, b);
  auto xt = test::make(*be, Shape{rows, K}, x), yt = test::make(*be, Shape{rows, ld}, y0);
  auto tmp = test::make(*be, Shape{rows, W}, std::vector<float>(static_cast<size_t>(rows * W), 7.0f));
  be->lora_shrink(xt, at, *plan, tmp);
  be->lora_expand(tmp, first, bt, *plan, off, yt);
  const auto y = test::get(*be, yt);
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ld; ++c) {
      const auto at_y = static_cast<size_t>(r * ld + c);
      const int32_t s = slot_of_row[r];
      if (s < 0 || c < off || c >= off + N) {
        REQUIRE(y[at_y] == y0[at_y]);
        continue;
      }
      double want = y0[at_y];
      for (int64_t i = 0; i < R; ++i) {
        double t = 0;
        for (int64_t k = 0; k < K; ++k)
          t += double(a[static_cast<size_t>((s * W + first + i) * K + k)]) * x[static_cast<size_t>(r * K + k)];
        want += double(b[static_cast<size_t>((s * N + (c - off)) * R + i)]) * t;
      }
      worst = std::max(worst, std::abs(want - y[at_y]));
    }
  CHECK(worst < 1e-4);

  SECTION("bit for bit what the same ranks give from a tmp of their own") {
    // The site's own A ([S, R, K], the ranks cut out of the group's) shrunk into [rows, R].
    std::vector<float> own(static_cast<size_t>(S * R * K));
    for (int64_t s = 0; s < S; ++s)
      std::copy_n(a.begin() + (s * W + first) * K, R * K, own.begin() + s * R * K);
    auto own_a = test::make(*be, Shape{S, R, K}, own);
    auto own_tmp = be->alloc(DType::f32, Shape{rows, R});
    auto own_y = test::make(*be, Shape{rows, ld}, y0);
    be->lora_shrink(xt, own_a, *plan, own_tmp);
    be->lora_expand(own_tmp, 0, bt, *plan, off, own_y);
    CHECK(test::get(*be, own_y) == y);
  }
  SECTION("the contract refuses a rank range outside tmp") {
    CHECK_THROWS_AS(be->lora_expand(tmp, W - R + 1, bt, *plan, off, yt), std::invalid_argument);
    CHECK_THROWS_AS(be->lora_expand(tmp, -1, bt, *plan, off, yt), std::invalid_argument);
    auto short_tmp = be->alloc(DType::f32, Shape{rows - 1, W});
    CHECK_THROWS_AS(be->lora_expand(short_tmp, first, bt, *plan, off, yt), std::invalid_argument);
  }
}

TEST_CASE("lora expand group gives each member's own lora_expand, bit for bit", "[kernels][lora]") {
  // A shrink output of W ranks shared by four members of different N and R: one into an output
  // of its own from column 4, two into column ranges [0, I) and [I, 2I) of one output (the MLP's
  // gate and up), one into a third output. Rank offsets leave columns 14 and 15 of tmp unread.
  auto be = kernels::cpu::make_cpu_backend({.num_threads = 2});
  const int64_t S = 3, W = 23, I = 17;
  const std::vector<test::SeqDesc> seqs = {{.n_tokens = 2, .n_cached = 0, .slot = 0, .blocks = {0}, .lora_slot = 1},
                                           {.n_tokens = 1, .n_cached = 0, .slot = 1, .blocks = {1}},
                                           {.n_tokens = 3, .n_cached = 0, .slot = 2, .blocks = {2}, .lora_slot = 2},
                                           {.n_tokens = 1, .n_cached = 4, .slot = 3, .blocks = {3}, .lora_slot = 0}};
  auto plan = test::plan_of(*be, seqs, 16, 4, 4);
  const int64_t rows = plan->num_rows();
  struct Spec {
    int64_t first_rank, R, N, out, col;  // out: which of the three outputs
  };
  const Spec specs[] = {{0, 5, 23, 0, 4}, {5, 6, I, 1, 0}, {11, 3, I, 1, I}, {16, 7, 9, 2, 0}};
  const Shape out_shapes[] = {Shape{rows, 30}, Shape{rows, 2 * I}, Shape{rows, 9}};
  std::vector<Tensor> bs;
  for (size_t m = 0; m < 4; ++m)
    bs.push_back(test::make(*be, Shape{S, specs[m].N, specs[m].R},
                            test::random_vec(static_cast<size_t>(S * specs[m].N * specs[m].R), 20 + m, 0.3f)));
  auto tmp = test::make(*be, Shape{rows, W}, test::random_vec(static_cast<size_t>(rows * W), 30));
  std::vector<std::vector<float>> y0;
  for (size_t o = 0; o < 3; ++o) y0.push_back(test::random_vec(static_cast<size_t>(out_shapes[o].numel()), 40 + o));
  auto fresh_outputs = [&] {
    std::vector<Tensor> outs;
    for (size_t o = 0; o < 3; ++o) outs.push_back(test::make(*be, out_shapes[o], y0[o]));
    return outs;
  };
  auto members_of = [&](const std::vector<Tensor>& outs, const std::vector<size_t>& which) {
    std::vector<kernels::LoraExpandMember> ms;
    for (size_t m : which)
      ms.push_back({specs[m].first_rank, bs[m], outs[static_cast<size_t>(specs[m].out)], specs[m].col});
    return ms;
  };
  const std::vector<std::vector<size_t>> subsets = {{0, 1, 2, 3}, {2, 0}, {1, 2}, {3}};
  for (const auto& which : subsets) {
    INFO(which.size() << " members, the first " << which[0]);
    std::vector<Tensor> one_by_one = fresh_outputs(), grouped = fresh_outputs();
    for (auto& m : members_of(one_by_one, which)) be->lora_expand(tmp, m.first_rank, m.b, *plan, m.col_offset, m.out);
    const auto ms = members_of(grouped, which);
    be->lora_expand_group(tmp, ms, *plan);
    for (size_t o = 0; o < 3; ++o) {
      INFO("output " << o);
      CHECK(test::get(*be, grouped[o]) == test::get(*be, one_by_one[o]));
    }
  }
  // The members changed something (the comparison above is not between two untouched copies).
  std::vector<Tensor> outs = fresh_outputs();
  be->lora_expand_group(tmp, members_of(outs, {0, 1, 2, 3}), *plan);
  for (size_t o = 0; o < 3; ++o) CHECK(test::get(*be, outs[o]) != y0[o]);

  SECTION("the contract refuses what lora_expand refuses, too many or no members, and writes that meet") {
    std::vector<Tensor> o = fresh_outputs();
    auto ms = members_of(o, {0, 1, 2, 3});
    auto refused = [&](std::vector<kernels::LoraExpandMember> m) {
      CHECK_THROWS_AS(be->lora_expand_group(tmp, m, *plan), std::invalid_argument);
    };
    refused({});
    refused({ms[0], ms[1], ms[2], ms[3], ms[0]});
    auto bad = ms;
    bad[3].first_rank = W - specs[3].R + 1;  // past tmp's ranks
    refused(bad);
    bad = ms;
    bad[0].col_offset = 30 - specs[0].N + 1;  // past the output's columns
    refused(bad);
    bad = ms;
    bad[2].col_offset = I - 1;  // up's range starts in gate's
    refused(bad);
    bad = ms;
    bad[1].b = test::make(*be, Shape{2, I, 6}, std::vector<float>(static_cast<size_t>(2 * I * 6)));  // slot 2 missing
    refused(bad);
    refused({ms[0], ms[0]});  // the same member twice writes its columns twice
    // Two views of one buffer a row apart: different starts, overlapping memory.
    Tensor buf = be->alloc(DType::f32, Shape{rows + 1, 2 * I});
    kernels::LoraExpandMember gate = ms[1], up = ms[2];
    gate.out = buf.rows(0, rows);
    up.out = buf.rows(1, rows);
    refused({gate, up});
    // Views of consecutive ranges of one buffer do not meet (the fused projection of a one-row
    // step hands out such views), nor do members of no columns.
    Tensor flat = be->alloc(DType::f32, Shape{rows * 4 * I});
    gate.out = flat.rows(0, rows * 2 * I).reshape(Shape{rows, 2 * I});
    up.out = flat.rows(rows * 2 * I, rows * 2 * I).reshape(Shape{rows, 2 * I});
    be->fill_zero(flat);
    CHECK_NOTHROW(be->lora_expand_group(tmp, std::vector<kernels::LoraExpandMember>{gate, up}, *plan));
    kernels::LoraExpandMember empty = ms[0];
    empty.b = be->alloc(DType::f32, Shape{S, 0, 5});
    empty.out = o[1];  // would meet gate's columns if it wrote any
    CHECK_NOTHROW(be->lora_expand_group(tmp, std::vector<kernels::LoraExpandMember>{ms[1], empty}, *plan));
  }
}
