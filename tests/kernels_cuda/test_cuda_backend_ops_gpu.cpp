// The CUDA backend op by op against the CPU backend (the float32 reference) on random data:
// the dense ops, GEMMs with bf16 and f32 weights, the fused decode ops, K/V writes and paged
// and prefill attention, in the bf16 production mode and in the f32-weight reference mode,
// on mixed batches (decode rows, short and long prefill chunks, shuffled blocks), and the
// errors of bad shapes. Outputs are poisoned before each run so an unwritten element fails.
// The DeltaNet ops: test_cuda_deltanet_ops_gpu.cpp; FP8 weights: test_cuda_fp8_ops_gpu.cpp.
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

// A rope table as YaRN makes one (the fast dims kept, the slow ones divided by 4, a ramp between)
// with YaRN's attention scaling for factor 4.
kernels::RopeParams yarn_like(int64_t rotary) {
  kernels::RopeParams p;
  p.rotary_dim = rotary;
  for (int64_t i = 0; i < rotary / 2; ++i) {
    const double f = std::pow(1e7, -2.0 * static_cast<double>(i) / static_cast<double>(rotary));
    const double ramp = std::clamp((static_cast<double>(i) - 3.0) / 5.0, 0.0, 1.0);
    p.inv_freq.push_back(static_cast<float>(f / 4 * ramp + f * (1 - ramp)));
  }
  p.attention_scaling = static_cast<float>(0.1 * std::log(4.0) + 1.0);
  return p;
}

}  // namespace

TEST_CASE("cuda ops: rms_norm and gated_rms_norm match the CPU in f32 and bf16 outputs", "[cuda_ops][gpu]") {
  Pair p;
  // Head-size rows (a warp per row: 16-byte chunks for 128 and 256, scalar for 96) and
  // hidden-size rows (a block per row: 16-byte chunks for 4096, the register row kernel for 1000).
  for (const Shape& s : {Shape{5, 3, 256}, Shape{7, 3, 128}, Shape{4, 2, 96}, Shape{3, 4096}, Shape{2, 1000}}) {
  const int64_t d = s[s.rank() - 1];
  INFO("shape " << s.str());
  const auto x = test::random_vec(static_cast<size_t>(s.numel()), 1, 2.0f);
  const auto z = test::random_vec(static_cast<size_t>(s.numel()), 2);
  const auto w = test::random_vec(static_cast<size_t>(d), 3, 0.3f);
  Tensor wc = p.cpu->upload({DType::f32, Shape{d}, w.data()}), wg = p.gpu->upload({DType::f32, Shape{d}, w.data()});
  Tensor xc = test::make(*p.cpu, s, x), xg = act(*p.gpu, DType::f32, s, x);
  Tensor zc = test::make(*p.cpu, s, z), zg = act(*p.gpu, DType::f32, s, z);
  Tensor oc = p.cpu->alloc(DType::f32, s);
  p.cpu->rms_norm(xc, wc, 1e-6f, oc);
  const auto want = test::get(*p.cpu, oc);
  for (DType t : {DType::f32, DType::bf16}) {
    Tensor og = poisoned(*p.gpu, t, s);
    p.gpu->rms_norm(xg, wg, 1e-6f, og);
    CHECK(rel(test::get(*p.gpu, og), want) < (t == DType::f32 ? 1e-6 : 4e-3));
  }
  p.cpu->gated_rms_norm(xc, zc, wc, 1e-6f, oc);
  const auto want_g = test::get(*p.cpu, oc);
  for (DType t : {DType::f32, DType::bf16}) {
    Tensor og = poisoned(*p.gpu, t, s);
    p.gpu->gated_rms_norm(xg, zg, wg, 1e-6f, og);
    CHECK(rel(test::get(*p.gpu, og), want_g) < (t == DType::f32 ? 1e-6 : 4e-3));
  }
  // In place, as the model runs q_norm / k_norm.
  p.gpu->rms_norm(xg, wg, 1e-6f, xg);
  CHECK(rel(test::get(*p.gpu, xg), want) < 1e-6);
  }
}

TEST_CASE("cuda ops: gemm with bf16 and f32 weights, plain and accumulating", "[cuda_ops][gpu]") {
  for (bool f32w : {false, true}) {
    INFO("f32 weights " << f32w);
    Pair p(f32w);
    // M = 1 takes the skinny kernel (gemv.cu) on the bf16 path (K = 4104 runs its unrolled loop
    // and a tail, K = 384 the tail alone); 2-8 rows with K % 64 == 0 the tensor-core skinny
    // kernel (skinny_gemm.cu: 1 chunk, 6 chunks = fewer than one per warp, 64 chunks; 8 rows a
    // full column tile, 2 and 3 partial ones); wider M and other K cuBLAS. N = 200 leaves a
    // partial 16-row group.
    for (auto [M, K] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 384}, {3, 384}, {1, 4104}, {8, 4104}, {8, 4096}, {13, 1024}, {2, 64}, {64, 384}, {300, 384}}) {
      const int64_t N = 200;
      const auto x = test::random_vec(static_cast<size_t>(M * K), 10 + M);
      const auto wb = to_bf16_bits(test::random_vec(static_cast<size_t>(N * K), 20, 0.05f));
      const auto acc0 = test::random_vec(static_cast<size_t>(M * N), 30);
      Tensor wc = weight(*p.cpu, {N, K}, wb), wg = weight(*p.gpu, {N, K}, wb);
      Tensor xc = test::make(*p.cpu, {M, K}, x);
      Tensor xg = act(*p.gpu, p.gpu->activation_dtype(), {M, K}, x);
      for (bool accumulate : {false, true}) {
        Tensor oc = test::make(*p.cpu, {M, N}, acc0), og = act(*p.gpu, DType::f32, {M, N}, acc0);
        p.cpu->gemm(xc, wc, oc, accumulate);
        p.gpu->gemm(xg, wg, og, accumulate);
        INFO("M " << M << " K " << K << " accumulate " << accumulate);
        CHECK(rel(test::get(*p.gpu, og), test::get(*p.cpu, oc)) < (f32w ? 1e-5 : 1e-2));
      }
      // An f32 input on the bf16 path is converted by the backend.
      if (!f32w) {
        Tensor xf = act(*p.gpu, DType::f32, {M, K}, x);
        Tensor oc = p.cpu->alloc(DType::f32, {M, N}), og = poisoned(*p.gpu, DType::f32, {M, N});
        p.cpu->gemm(xc, wc, oc, false);
        p.gpu->gemm(xf, wg, og, false);
        CHECK(rel(test::get(*p.gpu, og), test::get(*p.cpu, oc)) < 1e-2);
      }
    }
  }
}

TEST_CASE("cuda ops: embedding, gather_rows, swiglu, split_query_gate, split_columns, sigmoid_gate, rope", "[cuda_ops][gpu]") {
  Pair p;
  const int64_t V = 50, H = 64;
  const auto table = to_bf16_bits(test::random_vec(static_cast<size_t>(V * H), 40));
  Tensor tc = weight(*p.cpu, {V, H}, table), tg = weight(*p.gpu, {V, H}, table);
  // Each sequence's last row is gathered (rows 0, 6, 8).
  const std::vector<SeqDesc> s2 =
      with_blocks({{1, 1000, 0, {}, {}, {}, 1}, {6, 3, 1, {}, {}, {}, 1}, {2, 70000, 2, {}, {}, {}, 1}}, 16, 5000, 3);
  const std::vector<int32_t> tokens = {7, 0, 49, 3, 3, 12, 5, 8, 1};
  auto pc = test::plan_of(*p.cpu, s2, 16, 5000, 3, tokens);
  auto pg = test::plan_of(*p.gpu, s2, 16, 5000, 3, tokens);
  const int64_t T = 9;

  Tensor ec = p.cpu->alloc(DType::f32, {T, H}), eg = poisoned(*p.gpu, DType::f32, {T, H});
  p.cpu->embedding(tc, *pc, ec);
  p.gpu->embedding(tg, *pg, eg);
  CHECK(test::get(*p.gpu, eg) == test::get(*p.cpu, ec));

  Tensor gc = p.cpu->alloc(DType::f32, {3, H}), gg = poisoned(*p.gpu, DType::f32, {3, H});
  p.cpu->gather_rows(ec, *pc, gc);
  p.gpu->gather_rows(eg, *pg, gg);
  CHECK(test::get(*p.gpu, gg) == test::get(*p.cpu, gc));

  const auto gu = test::random_vec(static_cast<size_t>(T * 2 * 96), 41, 3.0f);
  Tensor guc = test::make(*p.cpu, {T, 192}, gu), gug = act(*p.gpu, DType::f32, {T, 192}, gu);
  Tensor sc = p.cpu->alloc(DType::f32, {T, 96});
  p.cpu->swiglu(guc, sc);
  for (DType t : {DType::f32, DType::bf16}) {
    Tensor sg = poisoned(*p.gpu, t, {T, 96});
    p.gpu->swiglu(gug, sg);
    CHECK(rel(test::get(*p.gpu, sg), test::get(*p.cpu, sc)) < (t == DType::f32 ? 1e-6 : 4e-3));
  }

  const int64_t nq = 4, d = 256;
  const auto qg = test::random_vec(static_cast<size_t>(T * nq * 2 * d), 42);
  Tensor qgc = test::make(*p.cpu, {T, nq, 2 * d}, qg), qgg = act(*p.gpu, DType::f32, {T, nq, 2 * d}, qg);
  Tensor qc = p.cpu->alloc(DType::f32, {T, nq, d}), gatec = p.cpu->alloc(DType::f32, {T, nq, d});
  Tensor qgpu = poisoned(*p.gpu, DType::f32, {T, nq, d}), gategpu = poisoned(*p.gpu, DType::f32, {T, nq, d});
  p.cpu->split_query_gate(qgc, qc, gatec);
  p.gpu->split_query_gate(qgg, qgpu, gategpu);
  CHECK(test::get(*p.gpu, qgpu) == test::get(*p.cpu, qc));
  CHECK(test::get(*p.gpu, gategpu) == test::get(*p.cpu, gatec));

  // split_columns on a DeltaNet-like fused projection [qkv | z | b | a], exact copies.
  const std::vector<int64_t> widths = {96, 64, 3, 3};
  const int64_t ncols = 166;
  const auto fused = test::random_vec(static_cast<size_t>(T * ncols), 43);
  Tensor fc = test::make(*p.cpu, {T, ncols}, fused), fg = act(*p.gpu, DType::f32, {T, ncols}, fused);
  std::vector<Tensor> partc, partg;
  for (int64_t w : widths) {
    partc.push_back(p.cpu->alloc(DType::f32, {T, w}));
    partg.push_back(poisoned(*p.gpu, DType::f32, {T, w}));
  }
  p.cpu->split_columns(fc, partc);
  p.gpu->split_columns(fg, partg);
  for (size_t i = 0; i < widths.size(); ++i) CHECK(test::get(*p.gpu, partg[i]) == test::get(*p.cpu, partc[i]));
  std::vector<Tensor> short_parts = {poisoned(*p.gpu, DType::f32, {T, 100})};
  CHECK_THROWS_WITH(p.gpu->split_columns(fg, short_parts), Catch::Matchers::Contains("the parts hold 100 columns"));

  // RoPE at positions up to 70001 (the f32 angle recipe must agree far out).
  const kernels::RopeParams rp{64, 1e7};
  p.cpu->rope(qc, *pc, rp);
  p.gpu->rope(qgpu, *pg, rp);
  CHECK(rel(test::get(*p.gpu, qgpu), test::get(*p.cpu, qc)) < 1e-6);
  // A frequency table and attention scaling (YaRN's), on top of that.
  p.cpu->rope(qc, *pc, yarn_like(64));
  p.gpu->rope(qgpu, *pg, yarn_like(64));
  CHECK(rel(test::get(*p.gpu, qgpu), test::get(*p.cpu, qc)) < 1e-6);

  for (DType t : {DType::f32, DType::bf16}) {
    const auto qv = test::get(*p.cpu, qc);
    Tensor xc = test::make(*p.cpu, {T, nq, d}, qv), xg = act(*p.gpu, t, {T, nq, d}, qv);
    p.cpu->sigmoid_gate(xc, gatec);
    p.gpu->sigmoid_gate(xg, gategpu);
    CHECK(rel(test::get(*p.gpu, xg), test::get(*p.cpu, xc)) < (t == DType::f32 ? 1e-6 : 6e-3));
  }
}

TEST_CASE("cuda ops: the fused decode ops (prepare_qk, gate_up_swiglu) match the CPU's op by op composition", "[cuda_ops][gpu]") {
  Pair p;
  const std::vector<SeqDesc> s2 =
      with_blocks({{1, 1000, 0, {}}, {6, 3, 1, {}}, {2, 70000, 2, {}, {}, {}, 1}}, 16, 5000, 3);  // row 8 gathered
  const std::vector<int32_t> tokens = {7, 0, 49, 3, 3, 12, 5, 8, 1};
  auto pc = test::plan_of(*p.cpu, s2, 16, 5000, 3, tokens);
  auto pg = test::plan_of(*p.gpu, s2, 16, 5000, 3, tokens);
  const int64_t T = 9;
  // prepare_qk: one kernel on the GPU for head dims that are multiples of 32: a warp per head
  // where the rotated dims allow a shuffle (256 / 64, 128 / 128), a block per head otherwise
  // (256 / 48); the five separate ops for others (48). Positions reach 70001.
  for (auto [d, rot] : std::vector<std::pair<int64_t, int64_t>>{{256, 64}, {128, 128}, {256, 48}, {48, 16}}) {
    INFO("head dim " << d << " rotary " << rot);
    const int64_t nq = 6, nkv = 2;
    const auto qg = test::random_vec(static_cast<size_t>(T * nq * 2 * d), 50 + d, 2.0f);
    const auto kv = test::random_vec(static_cast<size_t>(T * nkv * d), 60 + d, 2.0f);
    const auto qn = test::random_vec(static_cast<size_t>(d), 70 + d, 0.5f);
    const auto kn = test::random_vec(static_cast<size_t>(d), 80 + d, 0.5f);
    Tensor qgc = test::make(*p.cpu, {T, nq, 2 * d}, qg), qgg = act(*p.gpu, DType::f32, {T, nq, 2 * d}, qg);
    Tensor qnc = test::make(*p.cpu, {d}, qn), qng = act(*p.gpu, DType::f32, {d}, qn);
    Tensor knc = test::make(*p.cpu, {d}, kn), kng = act(*p.gpu, DType::f32, {d}, kn);
    Tensor qc = p.cpu->alloc(DType::f32, {T, nq, d}), gatec = p.cpu->alloc(DType::f32, {T, nq, d});
    Tensor qgpu = poisoned(*p.gpu, DType::f32, {T, nq, d}), gategpu = poisoned(*p.gpu, DType::f32, {T, nq, d});
    for (const kernels::RopeParams& rp : {kernels::RopeParams{rot, 1e7}, yarn_like(rot)}) {
      INFO((rp.inv_freq.empty() ? "theta" : "YaRN-like table"));
      Tensor kc2 = test::make(*p.cpu, {T, nkv, d}, kv), kg2 = act(*p.gpu, DType::f32, {T, nkv, d}, kv);
      p.cpu->prepare_qk(qgc, qnc, knc, 1e-6f, *pc, rp, qc, gatec, kc2);
      p.gpu->prepare_qk(qgg, qng, kng, 1e-6f, *pg, rp, qgpu, gategpu, kg2);
      CHECK(test::get(*p.gpu, gategpu) == test::get(*p.cpu, gatec));
      CHECK(rel(test::get(*p.gpu, qgpu), test::get(*p.cpu, qc)) < 1e-6);
      CHECK(rel(test::get(*p.gpu, kg2), test::get(*p.cpu, kc2)) < 1e-6);
    }
  }
  // gate_up_swiglu: one row takes the fused weight-streaming kernel (K = 4104: unrolled loop
  // and tail; 384: tail only), three rows the GEMM + swiglu, 40 rows (cuBLAS) the GEMM into a
  // bf16 product + swiglu for a bf16 output; bf16 and f32 outputs.
  for (auto [M, K] : std::vector<std::pair<int64_t, int64_t>>{{1, 384}, {1, 4104}, {3, 384}, {40, 1024}}) {
    const int64_t inter = 160;
    const auto x = test::random_vec(static_cast<size_t>(M * K), 90 + M);
    const auto wb = to_bf16_bits(test::random_vec(static_cast<size_t>(2 * inter * K), 91, 0.05f));
    Tensor wc = weight(*p.cpu, {2 * inter, K}, wb), wg = weight(*p.gpu, {2 * inter, K}, wb);
    Tensor xc = test::make(*p.cpu, {M, K}, x), xg = act(*p.gpu, DType::bf16, {M, K}, x);
    Tensor scratch_c = p.cpu->alloc(DType::f32, {M, 2 * inter}), scratch_g = p.gpu->alloc(DType::f32, {M, 2 * inter});
    Tensor oc = p.cpu->alloc(DType::f32, {M, inter});
    p.cpu->gate_up_swiglu(xc, wc, scratch_c, oc);
    for (DType t : {DType::f32, DType::bf16}) {
      INFO("M " << M << " K " << K << " out " << (t == DType::f32 ? "f32" : "bf16"));
      Tensor og = poisoned(*p.gpu, t, {M, inter});
      p.gpu->gate_up_swiglu(xg, wg, scratch_g, og);
      CHECK(rel(test::get(*p.gpu, og), test::get(*p.cpu, oc)) < 1.5e-2);
    }
  }
}

namespace {

// The values a pool of type t holds for rows of d floats (the host codec stores the bytes the
// device's kv_write does).
std::vector<float> stored_as(DType t, std::vector<float> v, int64_t d) {
  std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes(t, d)));
  std::vector<double> back(static_cast<size_t>(d));
  for (size_t r = 0; r < v.size() / static_cast<size_t>(d); ++r) {
    encode_row(t, v.data() + r * d, bytes.data(), d);
    decode_row(t, bytes.data(), back.data(), d);
    for (int64_t i = 0; i < d; ++i) v[r * d + i] = static_cast<float>(back[i]);
  }
  return v;
}

// kv_write + paged_attention of one step over `seqs` (their earlier positions written first
// through a step of their own) on both backends, compared row by row: the GPU's pools are of
// type kv, the CPU's are f32 and hold the values the GPU's store.
void check_paged_attention(const std::vector<SeqDesc>& seq_shapes, int64_t nq, int64_t nkv, DType kv, uint64_t seed,
                           int64_t d = 256) {
  Pair p(false, kv);
  const int32_t bs = 16;
  int32_t num_blocks = 0;
  for (const auto& s : seq_shapes) num_blocks += static_cast<int32_t>((s.n_cached + s.n_tokens + bs - 1) / bs);
  num_blocks += 3;
  const auto seqs = with_blocks(seq_shapes, bs, num_blocks, seed);
  int64_t T = 0, ctx_total = 0;
  for (const auto& s : seqs) T += s.n_tokens;
  std::vector<SeqDesc> history;
  for (const auto& s : seqs)
    if (s.n_cached > 0) history.push_back({s.n_cached, 0, s.slot, s.blocks}), ctx_total += s.n_cached;
  const Shape pool{num_blocks, bs, nkv, d};
  Tensor kc = p.cpu->alloc(DType::f32, pool), vc = p.cpu->alloc(DType::f32, pool);
  Tensor kg = p.gpu->alloc(kv, pool), vg = p.gpu->alloc(kv, pool);
  for (Tensor* t : {&kc, &vc}) p.cpu->fill_zero(*t);
  for (Tensor* t : {&kg, &vg}) p.gpu->fill_zero(*t);
  if (ctx_total > 0) {
    auto hc = test::plan_of(*p.cpu, history, bs, num_blocks, 8);
    const auto hk = bf16_exact(test::random_vec(static_cast<size_t>(ctx_total * nkv * d), seed + 50));
    const auto hv = bf16_exact(test::random_vec(static_cast<size_t>(ctx_total * nkv * d), seed + 51));
    Tensor a = test::make(*p.cpu, {ctx_total, nkv, d}, stored_as(kv, hk, d));
    Tensor b = test::make(*p.cpu, {ctx_total, nkv, d}, stored_as(kv, hv, d));
    p.cpu->kv_write(a, b, *hc, kc, vc);
    auto hg = test::plan_of(*p.gpu, history, bs, num_blocks, 8);
    Tensor ag = act(*p.gpu, DType::f32, {ctx_total, nkv, d}, hk), bg = act(*p.gpu, DType::f32, {ctx_total, nkv, d}, hv);
    p.gpu->kv_write(ag, bg, *hg, kg, vg);
  }
  // Then the step itself: write its K/V and attend.
  auto pc = test::plan_of(*p.cpu, seqs, bs, num_blocks, 8);
  auto pg = test::plan_of(*p.gpu, seqs, bs, num_blocks, 8);
  const auto k = bf16_exact(test::random_vec(static_cast<size_t>(T * nkv * d), seed + 52));
  const auto v = bf16_exact(test::random_vec(static_cast<size_t>(T * nkv * d), seed + 53));
  const auto q = test::random_vec(static_cast<size_t>(T * nq * d), seed + 54);
  Tensor kcs = test::make(*p.cpu, {T, nkv, d}, stored_as(kv, k, d));
  Tensor vcs = test::make(*p.cpu, {T, nkv, d}, stored_as(kv, v, d));
  Tensor kgs = act(*p.gpu, DType::f32, {T, nkv, d}, k), vgs = act(*p.gpu, DType::f32, {T, nkv, d}, v);
  p.cpu->kv_write(kcs, vcs, *pc, kc, vc);
  p.gpu->kv_write(kgs, vgs, *pg, kg, vg);
  Tensor qc = test::make(*p.cpu, {T, nq, d}, q), qg = act(*p.gpu, DType::f32, {T, nq, d}, q);
  Tensor oc = p.cpu->alloc(DType::f32, {T, nq, d});
  const float scale = 1.0f / 16.0f;
  p.cpu->paged_attention(qc, kc, vc, *pc, scale, oc);
  const auto want = test::get(*p.cpu, oc);
  for (DType t : {DType::f32, DType::bf16}) {
    Tensor og = poisoned(*p.gpu, t, {T, nq, d});
    p.gpu->paged_attention(qg, kg, vg, *pg, scale, og);
    const auto got = test::get(*p.gpu, og);
    // Per row: decode rows are exact to ~1e-6; prefill rows use bf16 q, K/V and probabilities.
    int64_t row = 0;
    for (const auto& s : seqs) {
      for (int64_t i = 0; i < s.n_tokens; ++i, ++row) {
        const auto b = static_cast<size_t>(row * nq * d), e = b + static_cast<size_t>(nq * d);
        INFO("kv " << dtype_name(kv) << " out " << dtype_name(t) << " heads " << nq << "/" << nkv << " of " << d << " row " << row
                   << " (token " << i << " of a chunk of " << s.n_tokens << " after " << s.n_cached << ")");
        CHECK(rel(std::vector<float>(got.begin() + b, got.begin() + e), std::vector<float>(want.begin() + b, want.begin() + e)) <
              2e-2);
      }
    }
  }
}

}  // namespace

TEST_CASE("cuda ops: kv_write + paged_attention over a mixed decode / prefill batch", "[cuda_ops][gpu]") {
  // Decodes first (the decode kernel), then chunks and a decode row behind a chunk (the
  // prefill path), with earlier context already in the pools.
  check_paged_attention({{1, 37, 0, {}}, {1, 0, 1, {}}, {1, 130, 2, {}}, {20, 0, 3, {}}, {9, 23, 4, {}}, {1, 50, 5, {}},
                         {70, 100, 6, {}}},
                        8, 2, DType::bf16, 7);
}

TEST_CASE("cuda ops: prefill attention over several query tiles, split key ranges and every K/V type",
          "[cuda_ops][gpu]") {
  // A GQA group of 3 (row tiles end inside a token's heads), a chunk of several 64-row tiles
  // starting inside a block, a short chunk after a long prefix (its key range split across
  // CTAs and merged), and a chunk ending exactly on a block boundary.
  const std::vector<SeqDesc> shapes = {{150, 75, 0, {}}, {24, 1500, 1, {}}, {32, 16, 2, {}}, {3, 0, 3, {}}};
  check_paged_attention(shapes, 6, 2, DType::bf16, 11);
  check_paged_attention(shapes, 8, 2, DType::bf16, 12);
  for (DType kv : {DType::f16, DType::q8_0, DType::q4_0}) check_paged_attention(shapes, 6, 2, kv, 13);
  // head_dim 128 (two 64-column regions of the swizzled tiles instead of four).
  check_paged_attention(shapes, 8, 2, DType::bf16, 14, 128);
  check_paged_attention(shapes, 6, 2, DType::q8_0, 15, 128);
}

TEST_CASE("cuda ops: bad shapes are invalid_argument naming the op; huge allocations a readable error", "[cuda_ops][gpu]") {
  Pair p;
  Tensor x = p.gpu->alloc(DType::f32, {4, 8});
  Tensor w = p.gpu->upload({DType::f32, Shape{7}, std::vector<float>(7, 0.0f).data()});
  try {
    p.gpu->rms_norm(x, w, 1e-6f, x);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("rms_norm") != std::string::npos);
  }
  try {
    p.gpu->alloc(DType::f32, {int64_t{1} << 40});
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("out of device memory") != std::string::npos);
  }
  // The backend still works afterwards.
  p.gpu->fill_zero(x);
  CHECK(test::get(*p.gpu, x) == std::vector<float>(32, 0.0f));
}
