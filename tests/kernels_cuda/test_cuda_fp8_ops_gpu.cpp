// The CUDA backend's FP8-resident weights (fp8_gemm.cu, fp8_block_gemm.h) against an f64
// reference of the dequantised weights: the decode kernels, the block-scaled FP8 GEMM above
// the skinny range, and the widest weights' K-split decode tiles.
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
