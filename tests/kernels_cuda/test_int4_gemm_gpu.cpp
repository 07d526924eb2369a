// 4-bit weights on the CUDA backend (int4_gemm.cu, cuda_gemm_int4.cpp) against an f64 reference
// of the dequantised weights and against the CPU backend, which dequantises the same host
// tensors (kernels::Int4Groups) at upload: random codes, zeros (0 to 16: GPTQ v1's range),
// f16 scales, group sizes 32 / 64 / 128 / 256, with and without act order's permutation; every
// row count of the code-reading kernel (1 to 64: one, two, four and eight column tiles, one and
// two row tiles), cuBLAS over dequantised tiles above it, row views, the residual add, f32
// inputs, and the gate_up + SwiGLU paths.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>

#include "kernels/common/half.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/kernels_cpu/kernel_test_util.h"

using namespace ds;
using kernels::Backend;
using kernels::Shape;
using kernels::Tensor;

namespace {

// A random 4-bit weight [N, K] in the host form.
struct Int4Host {
  int64_t N, K, G;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  std::vector<uint8_t> zeros;
  std::vector<int32_t> perm;
  Int4Host(int64_t n, int64_t k, int64_t g, bool act_order, uint64_t seed) : N(n), K(k), G(g) {
    std::mt19937_64 rng(seed);
    codes.resize(static_cast<size_t>(N * K / 2));
    for (auto& c : codes) c = static_cast<uint8_t>(rng());
    scales.resize(static_cast<size_t>(N * (K / G)));
    for (auto& s : scales) s = f16_to_f32(f32_to_f16(std::ldexp(1.0f + static_cast<float>(rng() % 64) / 64, -4 - static_cast<int>(rng() % 5))));
    zeros.resize(scales.size());
    for (auto& z : zeros) z = static_cast<uint8_t>(rng() % 17);
    if (act_order) {
      perm.resize(static_cast<size_t>(K));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
    }
  }
  kernels::HostTensor host() const {
    return kernels::HostTensor(Shape{N, K}, codes.data(),
                               kernels::Int4Groups{scales.data(), zeros.data(), G, perm.empty() ? nullptr : perm.data()});
  }
  // The value multiplying input column perm[k] (stored column k) of row n.
  double stored(int64_t n, int64_t k) const {
    const int code = (codes[static_cast<size_t>((n * K + k) / 2)] >> (4 * (k & 1))) & 15;
    const size_t g = static_cast<size_t>(n * (K / G) + k / G);
    return static_cast<double>(scales[g]) * (code - zeros[g]);
  }
};

// x [M, K] · wᵀ in f64 over rows [n0, n0 + n) of w, plus acc.
std::vector<double> reference(const Int4Host& w, const std::vector<float>& x, int64_t M, int64_t n0, int64_t n,
                              const std::vector<float>& acc) {
  std::vector<double> out(static_cast<size_t>(M * n));
  std::vector<double> wr(static_cast<size_t>(w.K));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t k = 0; k < w.K; ++k) wr[static_cast<size_t>(w.perm.empty() ? k : w.perm[static_cast<size_t>(k)])] = w.stored(n0 + r, k);
    for (int64_t m = 0; m < M; ++m) {
      double s = acc.empty() ? 0.0 : acc[static_cast<size_t>(m * n + r)];
      for (int64_t k = 0; k < w.K; ++k) s += wr[static_cast<size_t>(k)] * x[static_cast<size_t>(m * w.K + k)];
      out[static_cast<size_t>(m * n + r)] = s;
    }
  }
  return out;
}

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

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<float> bf16_exact(std::vector<float> v) {
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

Tensor act(Backend& be, DType t, const Shape& s, const std::vector<float>& v) {
  Tensor x = be.alloc(t, s);
  be.copy_from_host(v, x);
  return x;
}

Tensor poisoned(Backend& be, DType t, const Shape& s) {
  return act(be, t, s, std::vector<float>(static_cast<size_t>(s.numel()), -12345.0f));
}

std::unique_ptr<Backend> gpu(int64_t int4_skinny_rows = cuda::CudaBackendOptions{}.paths.int4_skinny_rows) {
  cuda::CudaBackendOptions o;
  o.paths.int4_skinny_rows = int4_skinny_rows;
  o.sync_each_op = true;
  return cuda::make_cuda_backend(o);
}

}  // namespace

TEST_CASE("cuda ops: gemm with 4-bit weights against f64 and the CPU's dequantisation", "[cuda_ops][gpu][int4]") {
  auto g = gpu();
  auto cpu = kernels::cpu::make_cpu_backend({.num_threads = 2, .int4_weights = true});
  REQUIRE(g->int4_weights());
  {
    cuda::CudaBackendOptions o;
    o.f32_weights = true;
    REQUIRE_FALSE(cuda::make_cuda_backend(o)->int4_weights());
  }
  struct Case {
    int64_t M, N, K, G;
    double tol;  // in registers: exact products, f32 sums; through cuBLAS: the weight rounded to bf16
  };
  const double in_regs = 2e-5, via_bf16 = 8e-3;
  for (bool act_order : {false, true}) {
    for (const Case c : std::vector<Case>{{1, 264, 128, 128, in_regs},  {1, 264, 5120, 128, in_regs},
                                          {2, 264, 384, 32, in_regs},   {3, 264, 1280, 64, in_regs},
                                          {8, 264, 1024, 256, in_regs}, {13, 264, 384, 128, in_regs},
                                          {17, 264, 1280, 32, in_regs}, {32, 264, 384, 64, in_regs},
                                          {40, 264, 2048, 128, in_regs}, {64, 264, 1024, 1024, in_regs},
                                          {65, 264, 384, 128, via_bf16}, {300, 264, 1280, 32, via_bf16}}) {
      INFO("act order " << act_order << " M " << c.M << " N " << c.N << " K " << c.K << " G " << c.G);
      const Int4Host w(c.N, c.K, c.G, act_order, 50 + static_cast<uint64_t>(c.K + c.G + c.M));
      const auto x = bf16_exact(test::random_vec(static_cast<size_t>(c.M * c.K), 51 + c.M));
      const auto acc0 = test::random_vec(static_cast<size_t>(c.M * c.N), 52);
      Tensor wg = g->upload(w.host());
      REQUIRE(wg.dtype() == DType::int4);
      Tensor xg = act(*g, DType::bf16, {c.M, c.K}, x);
      // The CPU backend's product of the same host tensor (dequantised at its upload).
      Tensor wc = cpu->upload(w.host()), xc = act(*cpu, DType::f32, {c.M, c.K}, x);
      Tensor oc = cpu->alloc(DType::f32, {c.M, c.N});
      cpu->gemm(xc, wc, oc, false);
      const auto on_cpu = test::get(*cpu, oc);
      CHECK(rel64(on_cpu, reference(w, x, c.M, 0, c.N, {})) < 1e-5);
      for (bool accumulate : {false, true}) {
        INFO("accumulate " << accumulate);
        Tensor og = accumulate ? act(*g, DType::f32, {c.M, c.N}, acc0) : poisoned(*g, DType::f32, {c.M, c.N});
        g->gemm(xg, wg, og, accumulate);
        const auto got = test::get(*g, og);
        CHECK(rel64(got, reference(w, x, c.M, 0, c.N, accumulate ? acc0 : std::vector<float>{})) < c.tol);
        if (!accumulate) CHECK(rel64(got, widen(on_cpu)) < c.tol);
      }
      // A row view from row 136 keeps its groups.
      Tensor view = wg.rows(136, c.N - 136);
      Tensor ov = poisoned(*g, DType::f32, {c.M, c.N - 136});
      g->gemm(xg, view, ov, false);
      CHECK(rel64(test::get(*g, ov), reference(w, x, c.M, 136, c.N - 136, {})) < c.tol);
      // An f32 input is converted to bf16 first.
      Tensor xf = act(*g, DType::f32, {c.M, c.K}, x);
      Tensor of = poisoned(*g, DType::f32, {c.M, c.N});
      g->gemm(xf, wg, of, false);
      CHECK(rel64(test::get(*g, of), reference(w, x, c.M, 0, c.N, {})) < c.tol);
    }
  }
  // Steps above KernelPaths::int4_skinny_rows go to cuBLAS even when the kernel could take them.
  {
    auto small = gpu(4);
    const Int4Host w(264, 1024, 128, true, 53);
    const auto x = bf16_exact(test::random_vec(static_cast<size_t>(8 * 1024), 54));
    Tensor wg = small->upload(w.host()), xg = act(*small, DType::bf16, {8, 1024}, x);
    Tensor og = poisoned(*small, DType::f32, {8, 264});
    small->gemm(xg, wg, og, false);
    const double err = rel64(test::get(*small, og), reference(w, x, 8, 0, 264, {}));
    CHECK(err < via_bf16);
    CHECK(err > in_regs);  // the weight did go through bf16
  }
  // A weight over the 8 Mi-element tile: cuBLAS over three tiles of dequantised rows.
  {
    const int64_t M = 65, N = 4224, K = 4096;
    const Int4Host w(N, K, 128, false, 55);
    const auto x = bf16_exact(test::random_vec(static_cast<size_t>(M * K), 56));
    Tensor wg = g->upload(w.host()), xg = act(*g, DType::bf16, {M, K}, x);
    Tensor og = poisoned(*g, DType::f32, {M, N});
    g->gemm(xg, wg, og, false);
    CHECK(rel64(test::get(*g, og), reference(w, x, M, 0, N, {})) < via_bf16);
  }
  // Shapes the device layout does not hold (K not a multiple of 128, a group of 96, rows not in
  // groups of 8) are kept as bf16 values, and still multiply right.
  for (auto [N, K, G] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{64, 192, 64}, {64, 384, 96}, {60, 256, 128}}) {
    INFO("N " << N << " K " << K << " G " << G);
    const Int4Host w(N, K, G, false, 57);
    const auto x = bf16_exact(test::random_vec(static_cast<size_t>(3 * K), 58));
    Tensor wg = g->upload(w.host());
    CHECK(wg.dtype() == DType::bf16);
    Tensor xg = act(*g, DType::bf16, {3, K}, x), og = poisoned(*g, DType::f32, {3, N});
    g->gemm(xg, wg, og, false);
    CHECK(rel64(test::get(*g, og), reference(w, x, 3, 0, N, {})) < via_bf16);
  }
}

TEST_CASE("cuda ops: gate_up + SwiGLU over a 4-bit [gate; up]", "[cuda_ops][gpu][int4]") {
  auto g = gpu();
  // One row: the fused kernel (bf16 and f32 out, with and without act order); three rows the
  // GEMM and swiglu; 65 rows cuBLAS's bf16 product of the tiles, then swiglu.
  for (bool act_order : {false, true})
    for (auto [M, K] : std::vector<std::pair<int64_t, int64_t>>{{1, 384}, {1, 5120}, {3, 1280}, {65, 1024}}) {
      const int64_t inter = 136;
      const Int4Host w(2 * inter, K, 64, act_order, 59 + static_cast<uint64_t>(K));
      const auto x = bf16_exact(test::random_vec(static_cast<size_t>(M * K), 60));
      const auto want = swiglu_reference(reference(w, x, M, 0, 2 * inter, {}), M, inter);
      Tensor wg = g->upload(w.host()), xg = act(*g, DType::bf16, {M, K}, x);
      Tensor scratch = g->alloc(DType::f32, {M, 2 * inter});
      for (DType t : {DType::f32, DType::bf16}) {
        INFO("act order " << act_order << " M " << M << " K " << K << " out " << dtype_name(t));
        Tensor og = poisoned(*g, t, {M, inter});
        g->gate_up_swiglu(xg, wg, scratch, og);
        const double tol = M > 64 ? 1e-2 : t == DType::f32 ? 1e-4 : 5e-3;
        CHECK(rel64(test::get(*g, og), want) < tol);
      }
    }
}
