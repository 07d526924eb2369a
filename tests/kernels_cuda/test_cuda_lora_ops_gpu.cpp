// The CUDA backend's LoRA shrink and expand (kernels/cuda/lora.cu) against the CPU backend's: a
// decode-like batch mixing slots and rows without an adapter, many decode rows whose slots
// alternate (the plan groups them by slot into 16-row tiles), and a prefill-like batch whose
// sequences run across tiles; f32 and bf16 inputs, K from one pass of the shrink's threads to
// twelve, and not a multiple of its 4-column loads, ranks from 4 to 96 (the in_proj_qkv sites
// of split adapters stack three ranks; the expand holds 16 at a time), the shrink with one
// rank a block (steps of up to 512 rows) and four (longer; a rank of 6 leaves a block half
// used), an expand into a column range, one shrink shared by a group of sites (their ranks
// stacked, model/qwen35/lora_slots.h) and each site's expand from its rank range of it, in
// turn and as one lora_expand_group launch (equal to the former bit for bit: sites of different
// column counts, into column ranges of one output and into another output, and ranks whose
// expand needs more than 48 KiB of shared memory); plans as eager and as recorded steps make
// them (the latter pad the tiles with empty ones).
#include <catch2/catch.hpp>

#include "tests/kernels_cuda/cuda_ops_pair.h"

using namespace ds;
using namespace ds::test::cuda_ops;

namespace {

// One shrink for a group of sites that read one input (their ranks stacked, as LoraSlots keeps
// them: `ranks` in order), then each site's expand from its rank range of the shrink's output,
// one after the other as the model launched them before lora_expand_group (the later expands
// read what the shrink wrote kernels before), and the same expands as one lora_expand_group
// (groups of up to four), which must give the one-by-one results bit for bit. Site m writes
// kN[m % 4] columns (column blocks of the expand's grid that differ in number, a partial last
// block, fewer than one block) into output m % 2, after the sites before it there: the even
// sites share output 0 as gate and up share theirs, the odd ones output 1. One rank: a site
// alone.
void check_lora(Pair& p, const std::vector<test::SeqDesc>& seqs, int32_t block_size, int64_t K,
                const std::vector<int64_t>& ranks, int32_t table_blocks = 0) {
  constexpr int64_t kN[] = {700, 256, 33, 1030};
  const int64_t S = 4, off = 100, M = static_cast<int64_t>(ranks.size());
  const bool grouped = M <= kernels::Backend::kMaxLoraExpandMembers;
  std::vector<int64_t> n_of(static_cast<size_t>(M)), col_of(static_cast<size_t>(M)), first_of(static_cast<size_t>(M));
  int64_t used[2] = {off, off}, W = 0;
  for (int64_t m = 0; m < M; ++m) {
    const auto i = static_cast<size_t>(m);
    n_of[i] = kN[m % 4];
    col_of[i] = used[m % 2];
    used[m % 2] += n_of[i];
    first_of[i] = W;
    W += ranks[i];
  }
  const int64_t ld[2] = {used[0] + 100, used[1] + 100};
  const auto n = static_cast<int32_t>(seqs.size());
  auto pc = test::plan_of(*p.cpu, seqs, block_size, n, n);
  auto pg = test::plan_of(*p.gpu, seqs, block_size, n, n, {}, table_blocks);
  const int64_t rows = pc->num_rows();
  const auto a = test::random_vec(static_cast<size_t>(S * W * K), 1, 0.05f);
  const auto x = bf16_exact(test::random_vec(static_cast<size_t>(rows * K), 3));
  std::vector<float> y0[2];
  for (int o = 0; o < 2; ++o) y0[o] = test::random_vec(static_cast<size_t>(rows * ld[o]), 4 + static_cast<uint64_t>(o));
  Tensor ac = test::make(*p.cpu, Shape{S, W, K}, a), ag = act(*p.gpu, DType::f32, Shape{S, W, K}, a);
  std::vector<Tensor> bc, bg;
  for (int64_t m = 0; m < M; ++m) {
    const Shape shape{S, n_of[static_cast<size_t>(m)], ranks[static_cast<size_t>(m)]};
    const auto b = test::random_vec(static_cast<size_t>(shape.numel()), 10 + static_cast<uint64_t>(m), 0.05f);
    bc.push_back(test::make(*p.cpu, shape, b));
    bg.push_back(act(*p.gpu, DType::f32, shape, b));
  }
  auto members = [&](std::vector<Tensor>& b, std::vector<Tensor>& y) {
    std::vector<kernels::LoraExpandMember> ms;
    for (int64_t m = 0; m < M; ++m) {
      const auto i = static_cast<size_t>(m);
      ms.push_back({first_of[i], b[i], y[static_cast<size_t>(m % 2)], col_of[i]});
    }
    return ms;
  };
  auto expand_one_by_one = [&](kernels::Backend& be, const Tensor& tmp, std::vector<Tensor>& b,
                               const kernels::BatchPlan& plan, std::vector<Tensor>& y) {
    for (auto& m : members(b, y)) be.lora_expand(tmp, m.first_rank, m.b, plan, m.col_offset, m.out);
  };
  auto outputs = [&](Backend& be) {
    return std::vector<Tensor>{act(be, DType::f32, Shape{rows, ld[0]}, y0[0]),
                               act(be, DType::f32, Shape{rows, ld[1]}, y0[1])};
  };
  Tensor xc = test::make(*p.cpu, Shape{rows, K}, x);
  std::vector<Tensor> yc = outputs(*p.cpu);
  Tensor tc = p.cpu->alloc(DType::f32, Shape{rows, W});
  p.cpu->lora_shrink(xc, ac, *pc, tc);
  expand_one_by_one(*p.cpu, tc, bc, *pc, yc);
  const auto want_t = test::get(*p.cpu, tc);
  const std::vector<float> want_y[2] = {test::get(*p.cpu, yc[0]), test::get(*p.cpu, yc[1])};
  std::vector<int32_t> row_slot;
  for (const auto& s : seqs) row_slot.insert(row_slot.end(), static_cast<size_t>(s.n_tokens), s.lora_slot);
  // Rows without an adapter are untouched entirely, and every row's columns outside the sites'
  // ranges, bit for bit.
  auto check_untouched = [&](const std::vector<float>& got, int o) {
    for (int64_t r = 0; r < rows; ++r) {
      INFO("row " << r);
      const bool adapted = row_slot[static_cast<size_t>(r)] >= 0;
      for (int64_t c = 0; c < ld[o]; ++c) {
        const size_t at = static_cast<size_t>(r * ld[o] + c);
        if (!adapted || c < off || c >= used[o])
          if (got[at] != y0[o][at]) FAIL_CHECK("output " << o << " column " << c << " changed");
      }
    }
  };
  for (DType t : {DType::f32, DType::bf16}) {
    INFO("x " << dtype_name(t));
    Tensor xg = act(*p.gpu, t, Shape{rows, K}, x);
    std::vector<Tensor> yg = outputs(*p.gpu), yg_group = outputs(*p.gpu);
    Tensor tg = poisoned(*p.gpu, DType::f32, Shape{rows, W});
    p.gpu->lora_shrink(xg, ag, *pg, tg);
    expand_one_by_one(*p.gpu, tg, bg, *pg, yg);
    if (grouped) p.gpu->lora_expand_group(tg, members(bg, yg_group), *pg);
    // Adapted rows' rank vectors match; the others are left as they were.
    std::vector<float> got_t = test::get(*p.gpu, tg), want_adapted = want_t;
    for (int64_t r = 0; r < rows; ++r)
      if (row_slot[static_cast<size_t>(r)] < 0)
        for (int64_t i = 0; i < W; ++i) {
          const auto at = static_cast<size_t>(r * W + i);
          if (got_t[at] != -12345.0f) FAIL_CHECK("row " << r << " without an adapter: tmp changed");
          got_t[at] = want_adapted[at] = 0.0f;
        }
    CHECK(rel(got_t, want_adapted) < 1e-5);
    for (int o = 0; o < 2; ++o) {
      INFO("output " << o);
      const auto got_y = test::get(*p.gpu, yg[static_cast<size_t>(o)]);
      CHECK(rel(got_y, want_y[o]) < 1e-5);
      check_untouched(got_y, o);
      if (grouped) CHECK(test::get(*p.gpu, yg_group[static_cast<size_t>(o)]) == got_y);
    }
  }
}

}  // namespace

TEST_CASE("cuda ops: lora_shrink and lora_expand match the CPU", "[cuda_ops][gpu][lora]") {
  Pair p;
  SECTION("decode rows and a short prefill") {
    for (const int64_t R : {int64_t{4}, int64_t{16}, int64_t{48}}) {
      INFO("rank " << R);
      check_lora(p,
                 {{.n_tokens = 1, .n_cached = 5, .slot = 0, .blocks = {0}, .lora_slot = 3},
                  {.n_tokens = 1, .n_cached = 9, .slot = 1, .blocks = {1}},
                  {.n_tokens = 13, .n_cached = 0, .slot = 2, .blocks = {2}, .lora_slot = 0},
                  {.n_tokens = 2, .n_cached = 1, .slot = 3, .blocks = {3}, .lora_slot = 3}},
                 16, 1024, {R});
    }
  }
  SECTION("many decode rows whose slots alternate, eager and recorded-step plans") {
    std::vector<test::SeqDesc> seqs;
    for (int32_t i = 0; i < 70; ++i)
      seqs.push_back({.n_tokens = 1, .n_cached = 3 + i, .slot = i, .blocks = {i}, .lora_slot = i % 5 == 4 ? -1 : i % 4});
    for (const int32_t table_blocks : {0, 2})
      for (const int64_t K : {int64_t{384}, int64_t{4096}, int64_t{12288}}) {  // K in one pass of the shrink, and in 4 or 12
        INFO("table_blocks " << table_blocks << ", K " << K);
        check_lora(p, seqs, 128, K, {16}, table_blocks);
        check_lora(p, seqs, 128, K, {16}, table_blocks);  // the same again: no state left between launches
      }
  }
  SECTION("long prefills across tiles, slots changing inside a tile") {
    for (const int64_t R : {int64_t{16}, int64_t{96}}) {
      for (const int64_t K : {int64_t{1000}, int64_t{1024}, int64_t{1002}}) {  // 1002: no 4-column vectors
        INFO("rank " << R << ", K " << K);
        check_lora(p,
                   {{.n_tokens = 7, .n_cached = 0, .slot = 0, .blocks = {0}, .lora_slot = 1},
                    {.n_tokens = 150, .n_cached = 3, .slot = 1, .blocks = {1}, .lora_slot = 2},
                    {.n_tokens = 1, .n_cached = 20, .slot = 2, .blocks = {2}},
                    {.n_tokens = 40, .n_cached = 0, .slot = 3, .blocks = {3}, .lora_slot = 1},
                    {.n_tokens = 100, .n_cached = 0, .slot = 4, .blocks = {4}},
                    {.n_tokens = 30, .n_cached = 0, .slot = 5, .blocks = {5}, .lora_slot = 0}},
                   256, K, {R});
      }
    }
  }
  SECTION("a step of more than 512 rows (the shrink's four ranks a block)") {
    for (const int64_t R : {int64_t{16}, int64_t{6}}) {
      INFO("rank " << R);
      check_lora(p,
                 {{.n_tokens = 600, .n_cached = 0, .slot = 0, .blocks = {0}, .lora_slot = 1},
                  {.n_tokens = 50, .n_cached = 0, .slot = 1, .blocks = {1}},
                  {.n_tokens = 45, .n_cached = 0, .slot = 2, .blocks = {2}, .lora_slot = 3},
                  {.n_tokens = 1, .n_cached = 9, .slot = 3, .blocks = {3}, .lora_slot = 1}},
                 1024, 1024, {R});  // one block a sequence: the plan's pool has a block a sequence
    }
  }
  SECTION("one shrink for a group of sites, each expanding from its rank range") {
    // The 9B's groups at rank 16: q/k/v 16 + 16 + 16, the DeltaNet's in_proj_qkv (split
    // pieces: 48), z, b, a, and gate/up 16 + 16; and ranks whose ranges start off a multiple of
    // 4 or 16.
    const std::vector<std::vector<int64_t>> groups = {{16, 16, 16}, {48, 16, 16, 16}, {16, 16}, {5, 6, 2}, {3, 20},
                                                      {800, 16}};  // 800: past 48 KiB of shared memory
    for (const auto& ranks : groups) {
      INFO("ranks " << ranks.size() << " sites, the first " << ranks[0] << ", the last " << ranks.back());
      // Decode rows whose slots alternate, as a recorded step plans them.
      std::vector<test::SeqDesc> seqs;
      for (int32_t i = 0; i < 40; ++i)
        seqs.push_back({.n_tokens = 1, .n_cached = 3 + i, .slot = i, .blocks = {i}, .lora_slot = i % 5 == 4 ? -1 : i % 4});
      check_lora(p, seqs, 128, 4096, ranks, 2);
      // A step of more than 512 rows (the shrink's four ranks a block), K without 4-column vectors.
      check_lora(p,
                 {{.n_tokens = 530, .n_cached = 0, .slot = 0, .blocks = {0}, .lora_slot = 2},
                  {.n_tokens = 20, .n_cached = 0, .slot = 1, .blocks = {1}},
                  {.n_tokens = 9, .n_cached = 0, .slot = 2, .blocks = {2}, .lora_slot = 0}},
                 1024, 1002, ranks);
    }
  }
}
