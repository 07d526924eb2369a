// The CUDA backend's LoRA shrink and expand (kernels/cuda/lora.cu) against the CPU backend's, on
// a batch mixing slots and rows without an adapter, f32 and bf16 inputs, ranks up to 48 (the
// in_proj_qkv sites of split adapters at rank 16) and an expand into a column range.
#include <catch2/catch.hpp>

#include "tests/kernels_cuda/cuda_ops_pair.h"

using namespace ds;
using namespace ds::test::cuda_ops;

TEST_CASE("cuda ops: lora_shrink and lora_expand match the CPU", "[cuda_ops][gpu][lora]") {
  Pair p;
  for (const int64_t R : {int64_t{4}, int64_t{16}, int64_t{48}}) {
    const int64_t S = 4, K = 1024, N = 700, ld = 900, off = 100;
    INFO("rank " << R);
    const std::vector<test::SeqDesc> seqs = {{.n_tokens = 1, .n_cached = 5, .slot = 0, .blocks = {0}, .lora_slot = 3},
                                             {.n_tokens = 1, .n_cached = 9, .slot = 1, .blocks = {1}},
                                             {.n_tokens = 13, .n_cached = 0, .slot = 2, .blocks = {2}, .lora_slot = 0},
                                             {.n_tokens = 2, .n_cached = 1, .slot = 3, .blocks = {3}, .lora_slot = 3}};
    auto pc = test::plan_of(*p.cpu, seqs, 16, 4, 4);
    auto pg = test::plan_of(*p.gpu, seqs, 16, 4, 4);
    const int64_t rows = pc->num_rows();
    const auto a = test::random_vec(static_cast<size_t>(S * R * K), 1, 0.05f);
    const auto b = test::random_vec(static_cast<size_t>(S * N * R), 2, 0.05f);
    const auto x = bf16_exact(test::random_vec(static_cast<size_t>(rows * K), 3));
    const auto y0 = test::random_vec(static_cast<size_t>(rows * ld), 4);
    Tensor ac = test::make(*p.cpu, Shape{S, R, K}, a), ag = act(*p.gpu, DType::f32, Shape{S, R, K}, a);
    Tensor bc = test::make(*p.cpu, Shape{S, N, R}, b), bg = act(*p.gpu, DType::f32, Shape{S, N, R}, b);
    Tensor xc = test::make(*p.cpu, Shape{rows, K}, x);
    Tensor yc = test::make(*p.cpu, Shape{rows, ld}, y0);
    Tensor tc = p.cpu->alloc(DType::f32, Shape{rows, R});
    p.cpu->lora_shrink(xc, ac, *pc, tc);
    p.cpu->lora_expand(tc, bc, *pc, off, yc);
    const auto want_t = test::get(*p.cpu, tc), want_y = test::get(*p.cpu, yc);
    for (DType t : {DType::f32, DType::bf16}) {
      INFO("x " << dtype_name(t));
      Tensor xg = act(*p.gpu, t, Shape{rows, K}, x);
      Tensor yg = act(*p.gpu, DType::f32, Shape{rows, ld}, y0);
      Tensor tg = poisoned(*p.gpu, DType::f32, Shape{rows, R});
      p.gpu->lora_shrink(xg, ag, *pg, tg);
      p.gpu->lora_expand(tg, bg, *pg, off, yg);
      CHECK(rel(test::get(*p.gpu, tg), want_t) < 1e-5);
      const auto got_y = test::get(*p.gpu, yg);
      CHECK(rel(got_y, want_y) < 1e-5);
      // Rows without an adapter and columns outside the range are untouched, bit for bit.
      for (int64_t c = 0; c < ld; ++c) CHECK(got_y[static_cast<size_t>(ld + c)] == y0[static_cast<size_t>(ld + c)]);
      for (int64_t r = 0; r < rows; ++r) CHECK(got_y[static_cast<size_t>(r * ld)] == y0[static_cast<size_t>(r * ld)]);
    }
  }
}
