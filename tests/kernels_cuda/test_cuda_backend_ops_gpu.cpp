// The CUDA backend op by op against the CPU backend (the float32 reference) on random data:
// every op of backend.h, in the bf16 production mode and in the f32-weight reference mode,
// on mixed batches (decode rows, short and long prefill chunks, continuation from a state,
// shuffled blocks). Outputs are poisoned before each run so an unwritten element fails.
// FP8-resident weights (fp8_gemm.cu) against an f64 reference of the dequantised weights.
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

using namespace ds;
using kernels::Backend;
using kernels::Shape;
using kernels::Tensor;
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

struct Pair {
  std::unique_ptr<Backend> cpu;
  std::unique_ptr<Backend> gpu;
  explicit Pair(bool f32_weights = false, DType kv = DType::bf16, bool fp8_block_gemm = true,
                int64_t fp8_skinny_rows = cuda::CudaBackendOptions{}.paths.fp8_skinny_rows,
                DType recurrent_state = DType::f32) {
    cpu = kernels::cpu::make_cpu_backend({.num_threads = 2, .recurrent_state_dtype = recurrent_state});
    cuda::CudaBackendOptions o;
    o.f32_weights = f32_weights;
    o.kv_dtype = kv;
    o.recurrent_state_dtype = recurrent_state;
    o.paths.fp8_block_gemm = fp8_block_gemm;
    o.paths.fp8_skinny_rows = fp8_skinny_rows;
    o.sync_each_op = true;
    gpu = cuda::make_cuda_backend(o);
  }
};

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = static_cast<double>(a[i]) - b[i];
    d += e * e;
    r += static_cast<double>(b[i]) * b[i];
  }
  if (a.size() != b.size() || std::isnan(d)) return INFINITY;
  return std::sqrt(d / std::max(r, 1e-30));
}

// Rounds to the nearest bf16 (values both backends then store exactly).
std::vector<float> bf16_exact(std::vector<float> v) {
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

std::vector<uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
  return h;
}

// A weight uploaded from bf16 checkpoint bytes.
Tensor weight(Backend& be, const Shape& s, const std::vector<uint16_t>& bits) {
  return be.upload(kernels::HostTensor{DType::bf16, s, bits.data()});
}

Tensor act(Backend& be, DType t, const Shape& s, const std::vector<float>& v) {
  Tensor x = be.alloc(t, s);
  be.copy_from_host(v, x);
  return x;
}

// A tensor of the given type filled with NaN-free garbage that no op produces by chance.
Tensor poisoned(Backend& be, DType t, const Shape& s) {
  return act(be, t, s, std::vector<float>(static_cast<size_t>(s.numel()), -12345.0f));
}

// Shuffled distinct block ids for sequences of the given lengths.
std::vector<SeqDesc> with_blocks(std::vector<SeqDesc> seqs, int32_t bs, int32_t num_blocks, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed));
  size_t next = 0;
  for (auto& s : seqs) {
    const int64_t need = (s.n_cached + s.n_tokens + bs - 1) / bs;
    for (int64_t b = 0; b < need; ++b) s.blocks.push_back(ids.at(next++));
  }
  return seqs;
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
  const std::vector<SeqDesc> s2 = with_blocks({{1, 1000, 0, {}}, {6, 3, 1, {}}, {2, 70000, 2, {}}}, 16, 5000, 3);
  const std::vector<int32_t> tokens = {7, 0, 49, 3, 3, 12, 5, 8, 1};
  const std::vector<int64_t> logit_rows = {8, 0, 4};
  auto pc = test::plan_of(*p.cpu, s2, 16, 5000, 3, tokens, logit_rows);
  auto pg = test::plan_of(*p.gpu, s2, 16, 5000, 3, tokens, logit_rows);
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
  const std::vector<SeqDesc> s2 = with_blocks({{1, 1000, 0, {}}, {6, 3, 1, {}}, {2, 70000, 2, {}}}, 16, 5000, 3);
  const std::vector<int32_t> tokens = {7, 0, 49, 3, 3, 12, 5, 8, 1};
  auto pc = test::plan_of(*p.cpu, s2, 16, 5000, 3, tokens, {8});
  auto pg = test::plan_of(*p.gpu, s2, 16, 5000, 3, tokens, {8});
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

namespace {

// A random FP8 weight [N, K] as a checkpoint stores it: codes (every finite e4m3 value,
// subnormals included) and scales of 128 x 128 blocks (row_shift 7) or of rows and 128
// columns (row_shift 0), spread over 2^-6 .. 2^2 so a scale read from the wrong block shows.
struct Fp8Host {
  int64_t N, K;
  int row_shift;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  int64_t cols() const { return (K + 127) / 128; }
  Fp8Host(int64_t n, int64_t k, int shift, uint64_t seed) : N(n), K(k), row_shift(shift) {
    std::mt19937_64 rng(seed);
    codes.resize(static_cast<size_t>(N * K));
    for (auto& c : codes) {
      do c = static_cast<uint8_t>(rng());
      while ((c & 0x7f) == 0x7f);  // NaN
    }
    scales.resize(static_cast<size_t>((((N - 1) >> shift) + 1) * cols()));
    for (auto& s : scales) s = std::ldexp(1.0f + static_cast<float>(rng() % 64) / 64, static_cast<int>(rng() % 9) - 6) / 448;
  }
  double value(int64_t n, int64_t k) const {
    return static_cast<double>(qwen35::fp8::e4m3_to_f32(codes[static_cast<size_t>(n * K + k)])) *
           scales[static_cast<size_t>((n >> row_shift) * cols() + k / 128)];
  }
  Tensor upload(Backend& be) const {
    return be.upload(kernels::HostTensor{DType::fp8_e4m3, Shape{N, K}, codes.data(),
                                         kernels::Fp8Scales{scales.data(), cols(), row_shift}});
  }
};

// x [M, K] · wᵀ in f64 over rows [n0, n0 + n) of w, plus acc.
std::vector<double> fp8_reference(const Fp8Host& w, const std::vector<float>& x, int64_t M, int64_t n0, int64_t n,
                                  const std::vector<float>& acc) {
  std::vector<double> out(static_cast<size_t>(M * n));
  for (int64_t r = 0; r < n; ++r) {
    std::vector<double> wr(static_cast<size_t>(w.K));
    for (int64_t k = 0; k < w.K; ++k) wr[static_cast<size_t>(k)] = w.value(n0 + r, k);
    for (int64_t m = 0; m < M; ++m) {
      double s = acc.empty() ? 0.0 : acc[static_cast<size_t>(m * n + r)];
      for (int64_t k = 0; k < w.K; ++k) s += wr[static_cast<size_t>(k)] * x[static_cast<size_t>(m * w.K + k)];
      out[static_cast<size_t>(m * n + r)] = s;
    }
  }
  return out;
}

// silu(gate) * up of a [M, 2I] projection (gate columns first).
std::vector<double> swiglu_reference(const std::vector<double>& proj, int64_t M, int64_t inter) {
  std::vector<double> out(static_cast<size_t>(M * inter));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < inter; ++i) {
      const double g = proj[static_cast<size_t>(m * 2 * inter + i)], u = proj[static_cast<size_t>(m * 2 * inter + inter + i)];
      out[static_cast<size_t>(m * inter + i)] = g / (1 + std::exp(-g)) * u;
    }
  return out;
}

double rel64(const std::vector<float>& a, const std::vector<double>& b) {
  double d = 0, r = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    d += (a[i] - b[i]) * (a[i] - b[i]);
    r += b[i] * b[i];
  }
  if (a.size() != b.size() || std::isnan(d)) return INFINITY;
  return std::sqrt(d / std::max(r, 1e-30));
}

}  // namespace

TEST_CASE("cuda ops: gemm with FP8 weights against an f64 reference of the dequantised weights", "[cuda_ops][gpu][fp8]") {
  // The skinny kernel over its whole range (production hands it up to 8 rows, the block-scaled
  // GEMM more: the next test case); K here is no multiple of 512, so the block-scaled GEMM
  // never takes these shapes.
  Pair p(false, DType::bf16, true, 64);
  REQUIRE(p.gpu->fp8_weights());
  REQUIRE_FALSE(Pair(true).gpu->fp8_weights());
  // One row: the FP8 GEMV (K % 16 == 0; K = 400 its tail alone, 4224 the unrolled loop and a
  // tail, both ending in a partial 128-column block); 2-64 rows with K % 64 == 0 the FP8
  // skinny kernel (448: 7 chunks, fewer than one per warp; 1, 2, 4 and 8 column tiles, full
  // and partial); everything else (K = 200 or 100, 65 and 300 rows) cuBLAS over the weight
  // dequantised to bf16 (K = 100: not a multiple of 8, the scalar dequantiser). N = 200 ends
  // in a partial block of rows.
  struct Case {
    int64_t M, N, K;
    double tol;  // in registers: f32 sums; through cuBLAS: the weight rounded to bf16
  };
  const double in_regs = 2e-5, via_bf16 = 8e-3;
  for (int shift : {7, 0}) {
    for (const Case c : std::vector<Case>{{1, 200, 400, in_regs},    {1, 200, 4224, in_regs},  {2, 200, 448, in_regs},
                                          {3, 200, 4224, in_regs},   {8, 200, 448, in_regs},   {13, 200, 4224, in_regs},
                                          {32, 200, 448, in_regs},   {40, 200, 448, in_regs},  {64, 200, 4224, in_regs},
                                          {1, 200, 200, via_bf16},   {5, 200, 100, via_bf16},  {65, 200, 448, via_bf16},
                                          {300, 200, 400, via_bf16}}) {
      INFO("row_shift " << shift << " M " << c.M << " N " << c.N << " K " << c.K);
      const Fp8Host w(c.N, c.K, shift, 40 + static_cast<uint64_t>(c.K + shift));
      const auto x = bf16_exact(test::random_vec(static_cast<size_t>(c.M * c.K), 41 + c.M));
      const auto acc0 = test::random_vec(static_cast<size_t>(c.M * c.N), 42);
      Tensor wg = w.upload(*p.gpu);
      REQUIRE(wg.dtype() == DType::fp8_e4m3);
      Tensor xg = act(*p.gpu, DType::bf16, {c.M, c.K}, x);
      for (bool accumulate : {false, true}) {
        INFO("accumulate " << accumulate);
        Tensor og = accumulate ? act(*p.gpu, DType::f32, {c.M, c.N}, acc0) : poisoned(*p.gpu, DType::f32, {c.M, c.N});
        p.gpu->gemm(xg, wg, og, accumulate);
        CHECK(rel64(test::get(*p.gpu, og), fp8_reference(w, x, c.M, 0, c.N, accumulate ? acc0 : std::vector<float>{})) <
              c.tol);
      }
      // A row view from the second block of rows keeps its scales.
      Tensor view = wg.rows(128, c.N - 128);
      Tensor ov = poisoned(*p.gpu, DType::f32, {c.M, c.N - 128});
      p.gpu->gemm(xg, view, ov, false);
      CHECK(rel64(test::get(*p.gpu, ov), fp8_reference(w, x, c.M, 128, c.N - 128, {})) < c.tol);
      if (shift == 7) CHECK_THROWS_AS(wg.rows(100, 10), std::out_of_range);
      // An f32 input is converted to bf16 first.
      Tensor xf = act(*p.gpu, DType::f32, {c.M, c.K}, x);
      Tensor of = poisoned(*p.gpu, DType::f32, {c.M, c.N});
      p.gpu->gemm(xf, wg, of, false);
      CHECK(rel64(test::get(*p.gpu, of), fp8_reference(w, x, c.M, 0, c.N, {})) < c.tol);
    }
  }
  // Codes with a zero exponent only (e4m3 subnormals and zeros): a conversion that flushes
  // subnormals gives zeros (in the random weights above they are too small a part to show).
  for (int64_t M : {1, 8, 40}) {
    INFO("subnormal codes, M " << M);
    Fp8Host w(200, 4224, 7, 47);
    for (auto& code : w.codes) code &= 0x87;
    const auto x = bf16_exact(test::random_vec(static_cast<size_t>(M * w.K), 48));
    Tensor wg = w.upload(*p.gpu), xg = act(*p.gpu, DType::bf16, {M, w.K}, x);
    Tensor og = poisoned(*p.gpu, DType::f32, {M, w.N});
    p.gpu->gemm(xg, wg, og, false);
    CHECK(rel64(test::get(*p.gpu, og), fp8_reference(w, x, M, 0, w.N, {})) < in_regs);
  }
  // A weight over 32M elements: cuBLAS in two tiles of dequantised rows (8192 + 128), with the
  // block-scaled FP8 GEMM (which would take this shape) turned off.
  {
    const int64_t M = 65, N = 8320, K = 4096;
    Pair tiles(false, DType::bf16, false);
    const Fp8Host w(N, K, 7, 43);
    const auto x = bf16_exact(test::random_vec(static_cast<size_t>(M * K), 44));
    Tensor wg = w.upload(*tiles.gpu), xg = act(*tiles.gpu, DType::bf16, {M, K}, x);
    Tensor og = poisoned(*tiles.gpu, DType::f32, {M, N});
    tiles.gpu->gemm(xg, wg, og, false);
    CHECK(rel64(test::get(*tiles.gpu, og), fp8_reference(w, x, M, 0, N, {})) < via_bf16);
  }
  // The one-row gate_up + SwiGLU over an FP8 [gate; up] (the up rows start inside a block of
  // scales when I = 160), bf16 and f32 outputs; three rows take the GEMM + swiglu.
  for (auto [M, K] : std::vector<std::pair<int64_t, int64_t>>{{1, 400}, {1, 4224}, {3, 448}}) {
    const int64_t inter = 160;
    const Fp8Host w(2 * inter, K, 7, 45);
    const auto x = bf16_exact(test::random_vec(static_cast<size_t>(M * K), 46));
    const auto want = swiglu_reference(fp8_reference(w, x, M, 0, 2 * inter, {}), M, inter);
    Tensor wg = w.upload(*p.gpu), xg = act(*p.gpu, DType::bf16, {M, K}, x);
    Tensor scratch = p.gpu->alloc(DType::f32, {M, 2 * inter});
    for (DType t : {DType::f32, DType::bf16}) {
      INFO("M " << M << " K " << K << " out " << dtype_name(t));
      Tensor og = poisoned(*p.gpu, t, {M, inter});
      p.gpu->gate_up_swiglu(xg, wg, scratch, og);
      CHECK(rel64(test::get(*p.gpu, og), want) < (t == DType::f32 ? 1e-4 : 5e-3));
    }
  }
}

namespace {

// x as quantize_rows_fp8 writes it: per row and 128 columns, scale amax / 448, codes the
// nearest e4m3 of x / scale (the host's rounding is the device's: ties to even, saturating).
std::vector<float> fp8_activations(const std::vector<float>& x, int64_t M, int64_t K) {
  std::vector<float> q(x.size());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k0 = 0; k0 < K; k0 += 128) {
      float amax = 0.0f;
      for (int64_t k = k0; k < k0 + 128; ++k) amax = std::max(amax, std::fabs(x[static_cast<size_t>(m * K + k)]));
      const float scale = amax > 0.0f ? amax / 448.0f : 1.0f, inv = amax > 0.0f ? 448.0f / amax : 1.0f;
      for (int64_t k = k0; k < k0 + 128; ++k) {
        const size_t i = static_cast<size_t>(m * K + k);
        q[i] = qwen35::fp8::e4m3_to_f32(qwen35::fp8::f32_to_e4m3(x[i] * inv)) * scale;
      }
    }
  return q;
}

}  // namespace

TEST_CASE("cuda ops: FP8 GEMMs above the skinny range on the block-scaled FP8 GEMM", "[cuda_ops][gpu][fp8]") {
  // More than KernelPaths::fp8_skinny_rows (8) rows, 128 x 128 weight scales, K a multiple of
  // 512: x is quantised to e4m3 per
  // row and 128 columns and cuBLASLt multiplies codes, for the rows up to the last multiple of
  // 4; the rest take the FP8 skinny kernel with x in bf16. Against an f64 reference over the
  // dequantised weight and x as the two paths see it (only the order and precision of the sums
  // differ: the FP8 tensor cores' sums carry fewer bits than fp32), and farther from the
  // reference of x unquantised (so the path really is the quantised one). M = 65 and 1001 leave
  // rows to the skinny kernel; N = 200 ends in a partial block of rows. Steps of 9-64 rows run
  // on the decode tiles (fp8_block_gemm.cpp, decode_tile): 64 x 64 below 8192 weight rows (K
  // <= 4096 here), 128 x 64 from there (M = 38 leaves 2 rows to the skinny kernel).
  Pair p;
  struct Case {
    int64_t M, N, K;
  };
  const double tol = 1e-3;
  for (const Case c : std::vector<Case>{
           {65, 200, 512}, {300, 384, 4096}, {1001, 200, 512}, {12, 384, 512}, {64, 200, 1024}, {38, 8320, 512}}) {
    INFO("M " << c.M << " N " << c.N << " K " << c.K);
    const Fp8Host w(c.N, c.K, 7, 50 + static_cast<uint64_t>(c.K));
    const auto x = bf16_exact(test::random_vec(static_cast<size_t>(c.M * c.K), 51 + c.M));
    auto xq = fp8_activations(x, c.M, c.K);
    const int64_t quantised_rows = c.M / 4 * 4;
    std::copy(x.begin() + quantised_rows * c.K, x.end(), xq.begin() + quantised_rows * c.K);
    const auto acc0 = test::random_vec(static_cast<size_t>(c.M * c.N), 52);
    Tensor wg = w.upload(*p.gpu), xg = act(*p.gpu, DType::bf16, {c.M, c.K}, x);
    for (bool accumulate : {false, true}) {
      INFO("accumulate " << accumulate);
      const std::vector<float> acc = accumulate ? acc0 : std::vector<float>{};
      Tensor og = accumulate ? act(*p.gpu, DType::f32, {c.M, c.N}, acc0) : poisoned(*p.gpu, DType::f32, {c.M, c.N});
      p.gpu->gemm(xg, wg, og, accumulate);
      const auto got = test::get(*p.gpu, og);
      CHECK(rel64(got, fp8_reference(w, xq, c.M, 0, c.N, acc)) < tol);
      if (!accumulate) {
        const double vs_unquantised = rel64(got, fp8_reference(w, x, c.M, 0, c.N, {}));
        CHECK(vs_unquantised > 1e-3);
        CHECK(vs_unquantised < 0.06);
      }
    }
    // A row view from the second block of rows keeps its scales; an f32 x is rounded to bf16 first.
    Tensor view = wg.rows(128, c.N - 128);
    Tensor ov = poisoned(*p.gpu, DType::f32, {c.M, c.N - 128});
    p.gpu->gemm(xg, view, ov, false);
    CHECK(rel64(test::get(*p.gpu, ov), fp8_reference(w, xq, c.M, 128, c.N - 128, {})) < tol);
    Tensor xf = act(*p.gpu, DType::f32, {c.M, c.K}, x);
    Tensor of = poisoned(*p.gpu, DType::f32, {c.M, c.N});
    p.gpu->gemm(xf, wg, of, false);
    CHECK(rel64(test::get(*p.gpu, of), fp8_reference(w, xq, c.M, 0, c.N, {})) < tol);
  }
  // gate_up + SwiGLU: the [M, 2I] product in bf16 straight from cuBLASLt, then SwiGLU.
  {
    const int64_t M = 100, inter = 256, K = 512;
    const Fp8Host w(2 * inter, K, 7, 53);
    const auto x = bf16_exact(test::random_vec(static_cast<size_t>(M * K), 54));
    const auto want = swiglu_reference(fp8_reference(w, fp8_activations(x, M, K), M, 0, 2 * inter, {}), M, inter);
    Tensor wg = w.upload(*p.gpu), xg = act(*p.gpu, DType::bf16, {M, K}, x);
    Tensor scratch = p.gpu->alloc(DType::f32, {M, 2 * inter});
    Tensor og = poisoned(*p.gpu, DType::bf16, {M, inter});
    p.gpu->gate_up_swiglu(xg, wg, scratch, og);
    CHECK(rel64(test::get(*p.gpu, og), want) < 1e-2);
  }
}

TEST_CASE("cuda ops: FP8 decode steps of the widest weights split along K", "[cuda_ops][gpu][fp8]") {
  // 9-64 rows of a weight with N >= 20480 and K >= 5120 (the 27B's gate_up) run on 128 x 64
  // tiles with K split in two (fp8_block_gemm.cpp, decode_tile): the partial sums meet in a
  // workspace. Against the f64 reference of the quantised x as above, with and without the
  // residual, twice bit for bit; then gate_up + SwiGLU with its bf16 product.
  Pair p;
  const int64_t M = 12, N = 20480, K = 5120;
  const Fp8Host w(N, K, 7, 61);
  const auto x = bf16_exact(test::random_vec(static_cast<size_t>(M * K), 62));
  const auto xq = fp8_activations(x, M, K);
  const auto acc0 = test::random_vec(static_cast<size_t>(M * N), 63);
  Tensor wg = w.upload(*p.gpu), xg = act(*p.gpu, DType::bf16, {M, K}, x);
  Tensor og = poisoned(*p.gpu, DType::f32, {M, N});
  p.gpu->gemm(xg, wg, og, false);
  const auto first = test::get(*p.gpu, og);
  const auto want = fp8_reference(w, xq, M, 0, N, {});
  CHECK(rel64(first, want) < 1e-3);
  Tensor again = poisoned(*p.gpu, DType::f32, {M, N});
  p.gpu->gemm(xg, wg, again, false);
  CHECK(test::get(*p.gpu, again) == first);
  Tensor acc = act(*p.gpu, DType::f32, {M, N}, acc0);
  p.gpu->gemm(xg, wg, acc, true);
  std::vector<double> want_acc(want.size());
  for (size_t i = 0; i < want.size(); ++i) want_acc[i] = want[i] + acc0[i];
  CHECK(rel64(test::get(*p.gpu, acc), want_acc) < 1e-3);
  const int64_t inter = N / 2, rows = 16;
  const auto x16 = bf16_exact(test::random_vec(static_cast<size_t>(rows * K), 64));
  const auto want_act = swiglu_reference(fp8_reference(w, fp8_activations(x16, rows, K), rows, 0, N, {}), rows, inter);
  Tensor x16g = act(*p.gpu, DType::bf16, {rows, K}, x16);
  Tensor scratch = p.gpu->alloc(DType::f32, {rows, N});
  Tensor actg = poisoned(*p.gpu, DType::bf16, {rows, inter});
  p.gpu->gate_up_swiglu(x16g, wg, scratch, actg);
  CHECK(rel64(test::get(*p.gpu, actg), want_act) < 1e-2);
}
