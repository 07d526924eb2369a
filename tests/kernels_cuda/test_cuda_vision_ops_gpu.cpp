// The vision encoder's ops and M-RoPE on the CUDA backend against the CPU backend (the f32
// reference): LayerNorm, bias, both GELUs, the resampled position table, the rotary tables,
// attention within segments (head sizes 6 to 128; segments from 1 row to several hundred),
// attention from the fused QKV projection (bias, rotary and attention in one op), the GEMM
// with its bias (and the MLP's GELU) in the epilogue, RoPE and the
// fused q/k preparation with M-RoPE positions, and the whole encoder of the
// vision-language fixture. Outputs in f32 and in bf16 (the production GEMM inputs).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "kernels/cuda/cuda_backend.h"
#include "model/qwen35/config.h"
#include "model/qwen35/vision_encoder.h"
#include "model/vision/decode.h"
#include "tests/kernels_cpu/kernel_test_util.h"
#include "tests/test_paths.h"

using namespace ds;
using kernels::Backend;
using kernels::Shape;
using kernels::Tensor;

namespace {

struct Pair {
  std::unique_ptr<Backend> cpu = kernels::cpu::make_cpu_backend({.num_threads = 2});
  std::unique_ptr<Backend> gpu;
  explicit Pair(bool f32_weights = false) {
    cuda::CudaBackendOptions o;
    o.f32_weights = f32_weights;
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

Tensor make(Backend& be, DType t, const Shape& s, const std::vector<float>& v) {
  Tensor x = be.alloc(t, s);
  be.copy_from_host(v, x);
  return x;
}

// A plan of random taps and rotary tables over these segments, on both backends.
struct Plans {
  std::vector<int64_t> seg;
  std::vector<int32_t> idx;
  std::vector<float> w, cs, sn;
  std::unique_ptr<kernels::VisionPlan> cpu, gpu;
  Plans(Pair& p, std::vector<int64_t> segments, int64_t table_rows, int64_t half) : seg(std::move(segments)) {
    int64_t rows = 0;
    for (int64_t s : seg) rows += s;
    std::mt19937 rng(5);
    for (int64_t i = 0; i < rows * 4; ++i) idx.push_back(static_cast<int32_t>(rng() % table_rows));
    w = test::random_vec(static_cast<size_t>(rows * 4), 6, 0.5f);
    for (float a : test::random_vec(static_cast<size_t>(rows * half), 7, 3.0f)) {
      cs.push_back(std::cos(a));
      sn.push_back(std::sin(a));
    }
    kernels::VisionBatchDesc d;
    d.segments = seg;
    d.pos_index = idx;
    d.pos_weight = w;
    d.pos_table_rows = table_rows;
    d.rope_half = half;
    d.rope_cos = cs;
    d.rope_sin = sn;
    cpu = p.cpu->plan_vision(d);
    gpu = p.gpu->plan_vision(d);
  }
};

}  // namespace

TEST_CASE("cuda vision ops: layer_norm, add_bias and both GELUs match the CPU", "[cuda_ops][gpu][vision]") {
  Pair p;
  const int64_t n = 300, d = 1152;
  const auto xs = test::random_vec(n * d, 1, 2.0f), ws = test::random_vec(d, 2), bs = test::random_vec(d, 3);
  for (DType out_t : {DType::f32, DType::bf16}) {
    Tensor xc = make(*p.cpu, DType::f32, Shape{n, d}, xs), xg = make(*p.gpu, DType::f32, Shape{n, d}, xs);
    Tensor wc = make(*p.cpu, DType::f32, Shape{d}, ws), wg = make(*p.gpu, DType::f32, Shape{d}, ws);
    Tensor bc = make(*p.cpu, DType::f32, Shape{d}, bs), bg = make(*p.gpu, DType::f32, Shape{d}, bs);
    Tensor oc = p.cpu->alloc(DType::f32, Shape{n, d}), og = p.gpu->alloc(out_t, Shape{n, d});
    const double tol = out_t == DType::f32 ? 1e-6 : 5e-3;
    p.cpu->layer_norm(xc, wc, bc, 1e-6f, oc);
    p.gpu->layer_norm(xg, wg, bg, 1e-6f, og);
    CHECK(rel(test::get(*p.gpu, og), test::get(*p.cpu, oc)) < tol);
    for (auto kind : {Backend::Gelu::erf, Backend::Gelu::tanh}) {
      p.cpu->gelu(xc, bc, kind, oc);
      p.gpu->gelu(xg, bg, kind, og);
      CHECK(rel(test::get(*p.gpu, og), test::get(*p.cpu, oc)) < tol);
    }
  }
  Tensor xc = make(*p.cpu, DType::f32, Shape{n, d}, xs), xg = make(*p.gpu, DType::f32, Shape{n, d}, xs);
  Tensor bc = make(*p.cpu, DType::f32, Shape{d}, bs), bg = make(*p.gpu, DType::f32, Shape{d}, bs);
  p.cpu->add_bias(xc, bc);
  p.gpu->add_bias(xg, bg);
  CHECK(test::get(*p.gpu, xg) == test::get(*p.cpu, xc));
}

TEST_CASE("cuda vision ops: position table and rotary tables match the CPU", "[cuda_ops][gpu][vision]") {
  Pair p;
  Plans plans(p, {36, 4, 100}, 64, 36);
  const int64_t rows = 140, d = 72, heads = 3;
  const auto table = test::random_vec(64 * d, 8);
  // The table as a weight: bf16 on the GPU, so the CPU gets the same rounded values.
  std::vector<uint16_t> bits;
  std::vector<float> rounded;
  for (float v : table) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    const uint16_t b = static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    bits.push_back(b);
    const uint32_t back = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &back, 4);
    rounded.push_back(f);
  }
  Tensor tg = p.gpu->upload(kernels::HostTensor{DType::bf16, Shape{64, d}, bits.data()});
  Tensor tc = make(*p.cpu, DType::f32, Shape{64, d}, rounded);
  const auto xs = test::random_vec(rows * d, 9);
  Tensor xc = make(*p.cpu, DType::f32, Shape{rows, d}, xs), xg = make(*p.gpu, DType::f32, Shape{rows, d}, xs);
  p.cpu->add_position_embedding(tc, *plans.cpu, xc);
  p.gpu->add_position_embedding(tg, *plans.gpu, xg);
  CHECK(rel(test::get(*p.gpu, xg), test::get(*p.cpu, xc)) < 1e-6);
  const auto qs = test::random_vec(rows * heads * d, 10);
  Tensor qc = make(*p.cpu, DType::f32, Shape{rows, heads, d}, qs), qg = make(*p.gpu, DType::f32, Shape{rows, heads, d}, qs);
  p.cpu->rotary_embedding(qc, *plans.cpu);
  p.gpu->rotary_embedding(qg, *plans.gpu);
  CHECK(rel(test::get(*p.gpu, qg), test::get(*p.cpu, qc)) < 1e-6);
}

TEST_CASE("cuda vision ops: segment_attention matches the CPU for head sizes 6 to 128", "[cuda_ops][gpu][vision]") {
  Pair p;
  // Segments that straddle the 64-row tiles of the tensor-core kernel, single rows, and runs
  // of 4-patch images (several images in one tile).
  std::vector<int64_t> small(20, 4);
  small.push_back(64);
  small.push_back(65);
  for (const auto& segments : {std::vector<int64_t>{70, 1, 131, 256, 33}, small}) {
    for (int64_t d : {6, 16, 40, 64, 72, 128}) {
      Plans plans(p, segments, 16, d / 2);
      int64_t rows = 0;
      for (int64_t n : segments) rows += n;
      const int64_t heads = 4;
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      const auto qs = test::random_vec(rows * heads * d, 11), ks = test::random_vec(rows * heads * d, 12),
                 vs = test::random_vec(rows * heads * d, 13);
      const Shape s{rows, heads, d};
      Tensor qc = make(*p.cpu, DType::f32, s, qs), kc = make(*p.cpu, DType::f32, s, ks), vc = make(*p.cpu, DType::f32, s, vs);
      Tensor qg = make(*p.gpu, DType::f32, s, qs), kg = make(*p.gpu, DType::f32, s, ks), vg = make(*p.gpu, DType::f32, s, vs);
      Tensor oc = p.cpu->alloc(DType::f32, s);
      p.cpu->segment_attention(qc, kc, vc, *plans.cpu, scale, oc);
      const auto want = test::get(*p.cpu, oc);
      // f32 output: the f32 kernel; bf16 output: the tensor-core kernel, whose bf16 Q, K, V
      // and P bring errors of a few 1e-3 (an indexing mistake gives errors of order 1).
      for (DType out_t : {DType::f32, DType::bf16}) {
        Tensor og = p.gpu->alloc(out_t, s);
        p.gpu->segment_attention(qg, kg, vg, *plans.gpu, scale, og);
        INFO("head size " << d << ", " << segments.size() << " segments, " << (out_t == DType::f32 ? "f32" : "bf16"));
        CHECK(rel(test::get(*p.gpu, og), want) < (out_t == DType::f32 ? 2e-6 : 1e-2));
      }
    }
  }
}

TEST_CASE("cuda vision ops: qkv_segment_attention matches the CPU's steps at head size 72",
          "[cuda_ops][gpu][vision]") {
  // The fused path (bias, rotary and the bf16 pack in one pass, then the tensor-core kernel)
  // against the CPU's add_bias, split_columns, rotary_embedding and segment_attention: segments
  // of odd lengths that straddle the 128-row CTAs and the 64-key tiles, and single rows.
  Pair p;
  const std::vector<int64_t> segments{97, 1, 203, 129, 17, 63, 255};
  const int64_t heads = 3, d = 72, c = heads * d;
  Plans plans(p, segments, 16, d / 2);
  int64_t rows = 0;
  for (int64_t n : segments) rows += n;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const auto xs = test::random_vec(rows * 3 * c, 21), bs = test::random_vec(3 * c, 22, 0.5f);
  const Shape s{rows, heads, d};
  Tensor xc = make(*p.cpu, DType::f32, Shape{rows, 3 * c}, xs), bc = make(*p.cpu, DType::f32, Shape{3 * c}, bs);
  Tensor sc = p.cpu->alloc(DType::f32, Shape{3 * rows, c}), oc = p.cpu->alloc(DType::f32, s);
  p.cpu->qkv_segment_attention(xc, bc, *plans.cpu, scale, sc, oc);
  const auto want = test::get(*p.cpu, oc);
  for (DType out_t : {DType::f32, DType::bf16}) {
    Tensor xg = make(*p.gpu, DType::f32, Shape{rows, 3 * c}, xs), bg = make(*p.gpu, DType::f32, Shape{3 * c}, bs);
    Tensor sg = p.gpu->alloc(DType::f32, Shape{3 * rows, c}), og = p.gpu->alloc(out_t, s);
    p.gpu->qkv_segment_attention(xg, bg, *plans.gpu, scale, sg, og);
    INFO((out_t == DType::f32 ? "f32" : "bf16") << " out");
    CHECK(rel(test::get(*p.gpu, og), want) < (out_t == DType::f32 ? 2e-6 : 1e-2));
  }
}

TEST_CASE("cuda vision ops: gemm_bias and gemm_bias_gelu (cuBLASLt's epilogues) match the CPU", "[cuda_ops][gpu][vision]") {
  // bf16 weight and x values on both sides, so only the summation order differs; the encoder's
  // shapes (N = 1152 with K = 4304: fc2; N = 3456 would be qkv) and an odd M.
  Pair p;
  const int64_t m = 301, k = 4304, n = 1152;
  auto bf16_values = [](std::vector<float> v, std::vector<uint16_t>* bits) {
    for (float& f : v) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      const uint16_t b = static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
      if (bits) bits->push_back(b);
      const uint32_t back = static_cast<uint32_t>(b) << 16;
      std::memcpy(&f, &back, 4);
    }
    return v;
  };
  std::vector<uint16_t> w_bits;
  const auto ws = bf16_values(test::random_vec(n * k, 31, 0.05f), &w_bits);
  const auto xs = bf16_values(test::random_vec(m * k, 32), nullptr);
  const auto bs = test::random_vec(n, 33), os = test::random_vec(m * n, 34);
  Tensor wg = p.gpu->upload(kernels::HostTensor{DType::bf16, Shape{n, k}, w_bits.data()});
  Tensor wc = make(*p.cpu, DType::f32, Shape{n, k}, ws);
  Tensor xc = make(*p.cpu, DType::f32, Shape{m, k}, xs), xg = make(*p.gpu, DType::bf16, Shape{m, k}, xs);
  Tensor bc = make(*p.cpu, DType::f32, Shape{n}, bs), bg = make(*p.gpu, DType::f32, Shape{n}, bs);
  for (bool accumulate : {false, true}) {
    Tensor oc = make(*p.cpu, DType::f32, Shape{m, n}, os), og = make(*p.gpu, DType::f32, Shape{m, n}, os);
    p.cpu->gemm_bias(xc, wc, bc, oc, accumulate);
    p.gpu->gemm_bias(xg, wg, bg, og, accumulate);
    INFO((accumulate ? "accumulating" : "overwriting"));
    CHECK(rel(test::get(*p.gpu, og), test::get(*p.cpu, oc)) < 1e-5);
  }
  // The MLP's first half, GELU(x · wᵀ + bias): the tanh form in cuBLASLt's GELU_BIAS epilogue,
  // the exact one as gemm then gelu, each into f32 and bf16 (what the encoder's fc2 reads).
  for (auto kind : {Backend::Gelu::tanh, Backend::Gelu::erf})
    for (DType out_t : {DType::f32, DType::bf16}) {
      INFO((kind == Backend::Gelu::tanh ? "tanh" : "erf") << " into " << dtype_name(out_t));
      Tensor sc = p.cpu->alloc(DType::f32, Shape{m, n}), sg = p.gpu->alloc(DType::f32, Shape{m, n});
      Tensor oc = p.cpu->alloc(DType::f32, Shape{m, n}), og = p.gpu->alloc(out_t, Shape{m, n});
      p.cpu->gemm_bias_gelu(xc, wc, bc, kind, sc, oc);
      p.gpu->gemm_bias_gelu(xg, wg, bg, kind, sg, og);
      CHECK(rel(test::get(*p.gpu, og), test::get(*p.cpu, oc)) < (out_t == DType::f32 ? 1e-5 : 5e-3));
    }
}

TEST_CASE("cuda ops: rope and prepare_qk with M-RoPE positions match the CPU", "[cuda_ops][gpu][vision]") {
  Pair p;
  const int64_t nq = 8, nkv = 2, d = 256, r = 64;
  const std::vector<int64_t> given = {3, 4, 5, 3, 4, 6, 3, 5, 5, 3, 5, 6};  // 4 rows of (t, h, w)
  std::vector<int32_t> blocks{0, 1, 2}, blocks2{3};
  const std::vector<int32_t> tokens(9, 0);
  kernels::SequenceChunk a{
      .tokens = tokens, .n_cached = 2, .block_ids = blocks, .state_slot = 0, .mrope_positions = given, .rope_delta = -3};
  kernels::SequenceChunk b{.tokens = std::span(tokens).first(1), .n_cached = 5, .block_ids = blocks2, .state_slot = 1,
                           .rope_delta = 7};  // a decode row after an image
  std::vector<kernels::SequenceChunk> seqs{b, a};
  kernels::BatchDesc desc;
  desc.seqs = seqs;
  desc.block_size = 8;
  desc.num_blocks = 4;
  desc.num_slots = 2;
  desc.vocab_size = 10;
  auto pc = p.cpu->plan(desc);
  auto pg = p.gpu->plan(desc);
  // The default RoPE and a YaRN-like table (frequencies and attention scaling, rope.h) under
  // the 9B's sections.
  kernels::RopeParams theta_rp(r, 1e7);
  theta_rp.mrope_section = {11, 11, 10};
  kernels::RopeParams yarn_rp = theta_rp;
  for (int64_t i = 0; i < r / 2; ++i) {
    const double f = std::pow(1e7, -2.0 * static_cast<double>(i) / static_cast<double>(r));
    const double ramp = std::clamp((static_cast<double>(i) - 3.0) / 5.0, 0.0, 1.0);
    yarn_rp.inv_freq.push_back(static_cast<float>(f / 4 * ramp + f * (1 - ramp)));
  }
  yarn_rp.attention_scaling = static_cast<float>(0.1 * std::log(4.0) + 1.0);
  for (const kernels::RopeParams& rp : {theta_rp, yarn_rp}) {
    INFO((rp.inv_freq.empty() ? "theta" : "yarn") << " frequencies");
    const auto xs = test::random_vec(10 * nq * d, 14);
    Tensor xc = make(*p.cpu, DType::f32, Shape{10, nq, d}, xs), xg = make(*p.gpu, DType::f32, Shape{10, nq, d}, xs);
    p.cpu->rope(xc, *pc, rp);
    p.gpu->rope(xg, *pg, rp);
    CHECK(rel(test::get(*p.gpu, xg), test::get(*p.cpu, xc)) < 1e-6);
    const auto qgs = test::random_vec(10 * nq * 2 * d, 15), kgs = test::random_vec(10 * nkv * d, 16),
               qn = test::random_vec(d, 17, 0.2f), kn = test::random_vec(d, 18, 0.2f);
    Tensor qg_c = make(*p.cpu, DType::f32, Shape{10, nq, 2 * d}, qgs), qg_g = make(*p.gpu, DType::f32, Shape{10, nq, 2 * d}, qgs);
    Tensor kc = make(*p.cpu, DType::f32, Shape{10, nkv, d}, kgs), kg = make(*p.gpu, DType::f32, Shape{10, nkv, d}, kgs);
    Tensor qnc = make(*p.cpu, DType::f32, Shape{d}, qn), qng = make(*p.gpu, DType::f32, Shape{d}, qn);
    Tensor knc = make(*p.cpu, DType::f32, Shape{d}, kn), kng = make(*p.gpu, DType::f32, Shape{d}, kn);
    Tensor qc = p.cpu->alloc(DType::f32, Shape{10, nq, d}), gc = p.cpu->alloc(DType::f32, Shape{10, nq, d});
    Tensor qq = p.gpu->alloc(DType::f32, Shape{10, nq, d}), gg = p.gpu->alloc(DType::f32, Shape{10, nq, d});
    p.cpu->prepare_qk(qg_c, qnc, knc, 1e-6f, *pc, rp, qc, gc, kc);
    p.gpu->prepare_qk(qg_g, qng, kng, 1e-6f, *pg, rp, qq, gg, kg);
    CHECK(rel(test::get(*p.gpu, qq), test::get(*p.cpu, qc)) < 1e-5);
    CHECK(rel(test::get(*p.gpu, kg), test::get(*p.cpu, kc)) < 1e-5);
  }
}

TEST_CASE("cuda vision: the fixture's encoder on the GPU matches the CPU", "[gpu][vision]") {
  const std::filesystem::path dir = test::data_path("tiny-qwen35-vl");
  const auto config = qwen35::ModelConfig::load(dir);
  REQUIRE(config.vision);
  const qwen35::Checkpoint ckpt(dir);
  std::vector<vision::ProcessedImage> images;
  for (const char* f : {"tall200x300.webp", "small40x24.gif", "square96.png"}) {
    std::ifstream in(dir / "images" / f, std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    images.push_back(vision::preprocess(vision::decode_image(bytes), vision::ImageProcessorConfig::load(dir)));
  }
  std::vector<const vision::ProcessedImage*> ptrs;
  for (const auto& im : images) ptrs.push_back(&im);
  auto cpu = kernels::cpu::make_cpu_backend({.num_threads = 2});
  auto enc_c = qwen35::VisionEncoder::load(*cpu, dir, ckpt, *config.vision);
  const auto want = test::get(*cpu, enc_c->encode(ptrs));
  for (bool f32 : {true, false}) {
    cuda::CudaBackendOptions o;
    o.f32_weights = f32;
    auto gpu = cuda::make_cuda_backend(o);
    auto enc_g = qwen35::VisionEncoder::load(*gpu, dir, ckpt, *config.vision);
    const double e = rel(test::get(*gpu, enc_g->encode(ptrs)), want);
    INFO((f32 ? "cuda-f32" : "cuda") << ": rel err " << e);
    CHECK(e < (f32 ? 1e-4 : 3e-2));
  }
}
