// lora_shrink / lora_expand (kernels/backend.h) on the CPU backend against a float64 reference of
// y += B[slot] (A[slot] x) per row, on a batch that mixes slots and rows without one, an expand
// into a column range of a wider output, an expand from a rank range of a wider shrink output
// (the shrink a group of projections shares, model/qwen35/lora_slots.h), and the contract's
// refusals.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/kernels_cpu/kernel_test_util.h"

using namespace ds;
using kernels::Shape;

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
