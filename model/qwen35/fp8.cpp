#include "model/qwen35/fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ds::qwen35::fp8 {

float e4m3_to_f32(uint8_t code) {
  const int exp = (code >> 3) & 0xf, mant = code & 0x7;
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);  // m/8 * 2^-6
  return sign * std::ldexp(static_cast<float>(8 + mant), exp - 10);      // (1 + m/8) * 2^(e-7)
}

uint8_t f32_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= kE4m3Max) return sign | 0x7e;
  if (a == 0) return sign;
  // Scaled by the spacing of the binade (2^-9 for subnormals and the first normal binade), a
  // is an integer-valued float after rounding; nearbyint rounds ties to even, which is the
  // even mantissa. A result of 16 (or 8 from a subnormal) carries into the next exponent,
  // which the code arithmetic below gets for free.
  int e2 = 0;
  std::frexp(a, &e2);  // a in [2^(e2-1), 2^e2)
  const int binade = std::max(e2 - 1, -6);  // normal exponent, subnormals share the first one
  const int q = static_cast<int>(std::nearbyint(std::ldexp(a, 3 - binade)));  // 0..16
  if (binade == -6 && q < 8) return sign | static_cast<uint8_t>(q);  // subnormal (or zero)
  return sign | static_cast<uint8_t>(((binade + 7) << 3) + (q - 8));
}

std::vector<float> dequantize(const BlockShape& s, std::span<const uint8_t> codes, std::span<const float> scales) {
  if (static_cast<int64_t>(codes.size()) != s.rows * s.cols ||
      static_cast<int64_t>(scales.size()) != s.scale_rows() * s.scale_cols())
    throw std::invalid_argument("fp8::dequantize: codes or scales do not match the shape");
  float table[256];
  for (int c = 0; c < 256; ++c) table[c] = e4m3_to_f32(static_cast<uint8_t>(c));
  std::vector<float> out(codes.size());
  const int64_t sc = s.scale_cols();
  for (int64_t i = 0; i < s.rows; ++i) {
    const float* srow = scales.data() + (i / s.block_rows) * sc;
    const uint8_t* q = codes.data() + i * s.cols;
    float* o = out.data() + i * s.cols;
    for (int64_t j = 0; j < s.cols; ++j) o[j] = table[q[j]] * srow[j / s.block_cols];
  }
  return out;
}

Quantized quantize(const BlockShape& s, std::span<const float> values) {
  if (static_cast<int64_t>(values.size()) != s.rows * s.cols)
    throw std::invalid_argument("fp8::quantize: values do not match the shape");
  Quantized out;
  out.codes.resize(values.size());
  out.scales.resize(static_cast<size_t>(s.scale_rows() * s.scale_cols()));
  for (int64_t bi = 0; bi < s.scale_rows(); ++bi) {
    const int64_t r0 = bi * s.block_rows, r1 = std::min(r0 + s.block_rows, s.rows);
    for (int64_t bj = 0; bj < s.scale_cols(); ++bj) {
      const int64_t c0 = bj * s.block_cols, c1 = std::min(c0 + s.block_cols, s.cols);
      float amax = 0;
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = c0; j < c1; ++j) amax = std::max(amax, std::fabs(values[static_cast<size_t>(i * s.cols + j)]));
      const float scale = amax > 0 ? amax / kE4m3Max : 1.0f;
      out.scales[static_cast<size_t>(bi * s.scale_cols() + bj)] = scale;
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = c0; j < c1; ++j) {
          const auto k = static_cast<size_t>(i * s.cols + j);
          out.codes[k] = f32_to_e4m3(values[k] / scale);
        }
    }
  }
  return out;
}

}  // namespace ds::qwen35::fp8
