// The float64 paged decode reference against an independent dense computation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/common/quant.h"
#include "kernels/cpu/paged_attention_ref.h"

using namespace ds;

namespace {

struct Case {
  int64_t n_q = 6, n_kv = 2, D = 64, bs = 4;
  DType kt = DType::bf16, vt = DType::bf16, qt = DType::f32;
  std::vector<int32_t> lens;
};

struct Built {
  std::vector<uint8_t> k, v, q;
  std::vector<int32_t> table;
  int64_t stride = 1, num_blocks = 0;
  // Dense decoded copies: [seq][t][kv head][D] and q [seq][head][D].
  std::vector<std::vector<double>> kd, vd;
  std::vector<double> qd;
};

Built build(const Case& c, std::mt19937& rng, double qscale = 1.0) {
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  Built b;
  int64_t used = 0;
  for (int32_t L : c.lens) {
    used += (L + c.bs - 1) / c.bs;
    b.stride = std::max<int64_t>(b.stride, (L + c.bs - 1) / c.bs);
  }
  b.num_blocks = used + 3;
  std::vector<int32_t> ids(static_cast<size_t>(b.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  b.table.assign(c.lens.size() * b.stride, -1);
  size_t next = 0;
  for (size_t s = 0; s < c.lens.size(); ++s)
    for (int64_t j = 0; j < (c.lens[s] + c.bs - 1) / c.bs; ++j) b.table[s * b.stride + j] = ids[next++];
  const int64_t rk = row_bytes(c.kt, c.D), rv = row_bytes(c.vt, c.D);
  const int64_t rows = b.num_blocks * c.bs * c.n_kv;
  b.k.assign(rows * rk, 0xFF);  // NaN everywhere nothing is written
  b.v.assign(rows * rv, 0xFF);
  std::vector<float> x(c.D);
  std::vector<double> y(c.D);
  for (size_t s = 0; s < c.lens.size(); ++s) {
    b.kd.emplace_back(c.lens[s] * c.n_kv * c.D);
    b.vd.emplace_back(c.lens[s] * c.n_kv * c.D);
    for (int32_t t = 0; t < c.lens[s]; ++t)
      for (int64_t h = 0; h < c.n_kv; ++h) {
        const int64_t row = (b.table[s * b.stride + t / c.bs] * c.bs + t % c.bs) * c.n_kv + h;
        for (float& v : x) v = u(rng);
        encode_row(c.kt, x.data(), &b.k[row * rk], c.D);
        decode_row(c.kt, &b.k[row * rk], &b.kd[s][(t * c.n_kv + h) * c.D], c.D);
        for (float& v : x) v = u(rng);
        encode_row(c.vt, x.data(), &b.v[row * rv], c.D);
        decode_row(c.vt, &b.v[row * rv], &b.vd[s][(t * c.n_kv + h) * c.D], c.D);
      }
  }
  const int64_t rq = row_bytes(c.qt, c.D);
  b.q.resize(c.lens.size() * c.n_q * rq);
  b.qd.resize(c.lens.size() * c.n_q * c.D);
  for (size_t r = 0; r < c.lens.size() * c.n_q; ++r) {
    for (float& v : x) v = static_cast<float>(u(rng) * qscale);
    encode_row(c.qt, x.data(), &b.q[r * rq], c.D);
    decode_row(c.qt, &b.q[r * rq], &b.qd[r * c.D], c.D);
  }
  return b;
}

cpu::PagedDecodeRefArgs args(const Case& c, const Built& b) {
  cpu::PagedDecodeRefArgs a;
  a.n_seqs = static_cast<int64_t>(c.lens.size());
  a.n_q_heads = c.n_q;
  a.n_kv_heads = c.n_kv;
  a.head_dim = c.D;
  a.block_size = c.bs;
  a.num_blocks = b.num_blocks;
  a.q = b.q.data();
  a.q_type = c.qt;
  a.k_pool = b.k.data();
  a.k_type = c.kt;
  a.v_pool = b.v.data();
  a.v_type = c.vt;
  a.block_table = b.table.data();
  a.max_blocks_per_seq = b.stride;
  a.seq_lens = c.lens.data();
  a.scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  return a;
}

// Dense softmax attention in long double, written independently of the reference.
std::vector<double> dense(const Case& c, const Built& b, double scale) {
  std::vector<double> out(c.lens.size() * c.n_q * c.D, 0.0);
  const int64_t G = c.n_q / c.n_kv;
  for (size_t s = 0; s < c.lens.size(); ++s)
    for (int64_t h = 0; h < c.n_q; ++h) {
      const int64_t kvh = h / G;
      const int32_t L = c.lens[s];
      if (L == 0) continue;
      std::vector<long double> w(L);
      long double mx = -INFINITY;
      for (int32_t t = 0; t < L; ++t) {
        long double dot = 0;
        for (int64_t d = 0; d < c.D; ++d)
          dot += static_cast<long double>(b.qd[(s * c.n_q + h) * c.D + d]) * b.kd[s][(t * c.n_kv + kvh) * c.D + d];
        w[t] = dot * scale;
        mx = std::max(mx, w[t]);
      }
      long double z = 0;
      for (auto& x : w) z += (x = std::exp(x - mx));
      for (int64_t d = 0; d < c.D; ++d) {
        long double acc = 0;
        for (int32_t t = 0; t < L; ++t) acc += w[t] * b.vd[s][(t * c.n_kv + kvh) * c.D + d];
        out[(s * c.n_q + h) * c.D + d] = static_cast<double>(acc / z);
      }
    }
  return out;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("paged reference equals dense attention for every pool type", "[kernels][attention_ref]") {
  std::mt19937 rng(11);
  const DType types[] = {DType::bf16, DType::f16, DType::q8_0, DType::q4_0};
  for (DType kt : types)
    for (DType vt : types) {
      Case c;
      c.kt = kt;
      c.vt = vt;
      c.qt = (static_cast<int>(kt) + static_cast<int>(vt)) % 2 ? DType::bf16 : DType::f32;
      c.lens = {0, 1, 3, 4, 5, 37};
      const Built b = build(c, rng);
      const auto ref = cpu::paged_attention_decode_ref(args(c, b));
      INFO("K " << dtype_name(kt) << " V " << dtype_name(vt));
      CHECK(max_diff(ref, dense(c, b, 1.0 / std::sqrt(64.0))) < 1e-12);
      // A zero-length sequence gives zeros; NaN in unused slots never leaks.
      for (int64_t i = 0; i < c.n_q * c.D; ++i) CHECK(ref[i] == 0.0);
      for (double v : ref) CHECK(std::isfinite(v));
    }
}

TEST_CASE("paged reference: group mapping, large logits, table order", "[kernels][attention_ref]") {
  std::mt19937 rng(12);
  SECTION("GQA groups are contiguous query heads") {
    Case c;
    c.n_q = 8;
    c.n_kv = 2;
    c.lens = {9, 20};
    const Built b = build(c, rng);
    CHECK(max_diff(cpu::paged_attention_decode_ref(args(c, b)), dense(c, b, 1.0 / 8.0)) < 1e-12);
  }
  SECTION("logits in the thousands stay finite (max subtraction)") {
    Case c;
    c.lens = {50};
    const Built b = build(c, rng, 400.0);
    const auto ref = cpu::paged_attention_decode_ref(args(c, b));
    for (double v : ref) CHECK(std::isfinite(v));
    CHECK(max_diff(ref, dense(c, b, 1.0 / 8.0)) < 1e-9);
  }
  SECTION("moving the blocks and rewriting the table changes nothing") {
    Case c;
    c.lens = {13, 26};
    Built b = build(c, rng);
    const auto before = cpu::paged_attention_decode_ref(args(c, b));
    // Swap the contents of the first two blocks of sequence 1 and swap their table entries.
    const int64_t bb = c.bs * c.n_kv * row_bytes(c.kt, c.D);
    const int32_t x = b.table[b.stride], y = b.table[b.stride + 1];
    for (int64_t i = 0; i < bb; ++i) {
      std::swap(b.k[x * bb + i], b.k[y * bb + i]);
      std::swap(b.v[x * bb + i], b.v[y * bb + i]);
    }
    std::swap(b.table[b.stride], b.table[b.stride + 1]);
    CHECK(max_diff(cpu::paged_attention_decode_ref(args(c, b)), before) == 0.0);
  }
}

TEST_CASE("paged reference rejects bad input", "[kernels][attention_ref]") {
  std::mt19937 rng(13);
  Case c;
  c.lens = {10};
  Built b = build(c, rng);
  auto a = args(c, b);
  b.table[1] = static_cast<int32_t>(b.num_blocks);
  CHECK_THROWS_AS(cpu::paged_attention_decode_ref(a), std::out_of_range);
  b.table[1] = -1;
  CHECK_THROWS_AS(cpu::paged_attention_decode_ref(a), std::out_of_range);
  a = args(c, b);
  const int32_t too_long = static_cast<int32_t>(b.stride * c.bs + 1);
  a.seq_lens = &too_long;
  CHECK_THROWS_AS(cpu::paged_attention_decode_ref(a), std::out_of_range);
  a = args(c, b);
  a.n_q_heads = 5;
  CHECK_THROWS_AS(cpu::paged_attention_decode_ref(a), std::invalid_argument);
  a = args(c, b);
  a.k_type = DType::q4_0;
  a.head_dim = 48;
  CHECK_THROWS_AS(cpu::paged_attention_decode_ref(a), std::invalid_argument);
}
