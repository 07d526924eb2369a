// lora_shrink / lora_expand (kernels/backend.h) on the CPU backend against a float64 reference of
// y += B[slot] (A[slot] x) per row, on a batch that mixes slots and rows without one, an expand
// into a column range of a wider output, and the contract's refusals.
#include <catch2/catch.hpp>

#include <cmath>

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
  be->lora_expand(tmp, bt, *plan, off, yt);
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
    CHECK_THROWS_AS(be->lora_expand(tmp, bt, *plan, off, wide), std::invalid_argument);
    auto bad_tmp = be->alloc(DType::f32, Shape{rows, R + 1});
    CHECK_THROWS_AS(be->lora_shrink(xt, at, *plan, bad_tmp), std::invalid_argument);
  }
}
