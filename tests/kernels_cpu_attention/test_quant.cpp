// Host encoders (kernels/common/quant.h): ggml Q8_0/Q4_0 semantics, bf16/f16 rows.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/common/quant.h"

using namespace ds;

TEST_CASE("Q8_0 follows ggml's reference quantiser", "[kernels][quant]") {
  SECTION("scale is amax/127 in f16 and values round to nearest") {
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = -8.0f + 0.5f * j;  // amax 8 at j = 0
    const BlockQ8_0 b = quantize_block_q8_0(x);
    CHECK(b.d == f32_to_f16(8.0f / 127.0f));
    CHECK(b.qs[0] == -127);
    CHECK(b.qs[16] == 0);
    // 0.5 * 127/8 = 7.9375 -> 8; 7.5 * 127/8 = 119.0625 -> 119
    CHECK(b.qs[17] == 8);
    CHECK(b.qs[31] == 119);
  }
  SECTION("an all-zero block has scale 0 and zero values") {
    float x[32] = {};
    const BlockQ8_0 b = quantize_block_q8_0(x);
    CHECK(b.d == 0);
    for (int j = 0; j < 32; ++j) CHECK(b.qs[j] == 0);
  }
  SECTION("round trip is within half a step") {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-5.f, 5.f);
    for (int rep = 0; rep < 200; ++rep) {
      float x[32];
      for (float& v : x) v = u(rng) * (rep % 3 == 0 ? 1e-3f : 1.f);
      const BlockQ8_0 b = quantize_block_q8_0(x);
      float amax = 0;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      const double d = amax / 127.0, d16 = f16_to_f32(b.d);
      // Half a step, plus what rounding the scale to f16 moves the largest value.
      const double tol = 0.5 * d + 127 * std::fabs(d - d16) + 1e-12;
      for (int j = 0; j < 32; ++j) CHECK(std::fabs(dequantize_q8_0(b, j) - x[j]) <= tol);
    }
  }
}

TEST_CASE("Q4_0 follows ggml's reference quantiser", "[kernels][quant]") {
  SECTION("the signed extreme maps to nibble 0, element j+16 is the high nibble") {
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = 0.1f * (j - 16);  // -1.6 .. 1.5
    x[5] = -4.0f;                                           // largest magnitude, negative
    x[20] = 3.9f;
    const BlockQ4_0 b = quantize_block_q4_0(x);
    CHECK(b.d == f32_to_f16(0.5f));  // d = max / -8 = 0.5, id = 2
    CHECK((b.qs[5] & 0x0F) == 0);    // -4 * 2 + 8.5 = 0.5 -> 0
    CHECK((b.qs[4] >> 4) == 15);     // element 20: 3.9 * 2 + 8.5 = 16.3 -> clamped to 15
    CHECK((b.qs[0] & 0x0F) == 5);    // -1.6 * 2 + 8.5 = 5.3 -> 5
    CHECK((b.qs[0] >> 4) == 8);      // element 16: 0 -> 8.5 -> 8
    CHECK(dequantize_q4_0(b, 5) == -4.0);
  }
  SECTION("a positive extreme gives a negative scale; the first of equal magnitudes wins") {
    float x[32] = {};
    x[3] = 2.0f;
    x[9] = -2.0f;
    const BlockQ4_0 b = quantize_block_q4_0(x);
    CHECK(f16_to_f32(b.d) == -0.25f);
    CHECK((b.qs[3] & 0x0F) == 0);   // 2 * -4 + 8.5 = 0.5 -> 0: value -8 * -0.25 = 2
    CHECK((b.qs[9] & 0x0F) == 15);  // -2 * -4 + 8.5 = 16.5 -> 16 -> 15: value 7 * -0.25
    CHECK(dequantize_q4_0(b, 3) == 2.0);
  }
  SECTION("round trip error is at most one step") {
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> u(-3.f, 3.f);
    for (int rep = 0; rep < 200; ++rep) {
      float x[32];
      for (float& v : x) v = u(rng);
      const BlockQ4_0 b = quantize_block_q4_0(x);
      const double d = std::fabs(f16_to_f32(b.d));
      for (int j = 0; j < 32; ++j) CHECK(std::fabs(dequantize_q4_0(b, j) - x[j]) <= d * 1.02);
    }
  }
}

TEST_CASE("encode_row and decode_row agree for every type", "[kernels][quant]") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> x(64);
  for (float& v : x) v = u(rng);
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::q8_0, DType::q4_0}) {
    std::vector<uint8_t> buf(static_cast<size_t>(row_bytes(t, 64)) + 1);  // +1: rows need no alignment
    encode_row(t, x.data(), buf.data() + 1, 64);
    std::vector<double> y(64);
    decode_row(t, buf.data() + 1, y.data(), 64);
    const double tol = t == DType::f32 ? 0 : t == DType::f16 ? 1e-3 : t == DType::bf16 ? 8e-3 : t == DType::q8_0 ? 0.02 : 0.3;
    for (int i = 0; i < 64; ++i) CHECK(std::fabs(y[i] - x[i]) <= tol);
    // Decoding is exact: re-encoding the decoded values reproduces the bytes.
    std::vector<float> yf(y.begin(), y.end());
    std::vector<uint8_t> again(buf.size() - 1);
    encode_row(t, yf.data(), again.data(), 64);
    CHECK(std::vector<uint8_t>(buf.begin() + 1, buf.end()) == again);
  }
  CHECK_THROWS_AS(encode_row(DType::q4_0, x.data(), nullptr, 40), std::invalid_argument);
}
