#include "model/qwen35/fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <thread>
#include <vector>

namespace ds::qwen35::fp8 {

void for_ranges(int64_t n, int64_t min_per_thread, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads = std::clamp<int64_t>(n / std::max<int64_t>(1, min_per_thread), 1, std::min<int64_t>(hw, 64));
  if (threads <= 1) return fn(0, n);
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  const auto range = [&](int64_t t) { return std::pair{n * t / threads, n * (t + 1) / threads}; };
  for (int64_t t = 1; t < threads; ++t) {
    const auto [b, e] = range(t);
    pool.emplace_back([&fn, b, e] { fn(b, e); });
  }
  const auto [b, e] = range(0);
  fn(b, e);
  for (auto& th : pool) th.join();
}

float e4m3_to_f32(uint8_t code) {
  const int exp = (code >> 3) & 0xf, mant = code & 0x7;
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);  // m/8 * 2^-6
  return sign * std::ldexp(static_cast<float>(8 + mant), exp - 10);      // (1 + m/8) * 2^(e-7)
}

uint8_t f32_to_e4m3(float x) {
  // Bit arithmetic rather than frexp/nearbyint: --quantization fp8 runs this on every weight
  // of a 27B model at load.
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  const uint32_t mag = bits & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0x7f;                  // NaN
  if (mag >= 0x43e00000u) return sign | 0x7e;          // |x| >= 448 (and inf): saturate
  if (mag < 0x3c800000u) {                             // |x| < 2^-6: subnormal steps of 2^-9
    float a;
    std::memcpy(&a, &mag, 4);
    // Adding and removing 2^23 rounds a*2^9 (< 8, exact) to an integer, ties to even; 8
    // is the code of 2^-6, the first normal, so no special case.
    const float q = (a * 512.0f + 8388608.0f) - 8388608.0f;
    return sign | static_cast<uint8_t>(q);
  }
  // Normal: keep 3 of f32's 23 mantissa bits, rounding to nearest even; a carry out of the
  // mantissa increments the exponent, as it should. Rebias the exponent from 127 to 7.
  const uint32_t rounded = mag + 0x7ffffu + ((mag >> 20) & 1u);
  return sign | static_cast<uint8_t>((rounded >> 20) - ((127u - 7u) << 3));
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
  // Bands of block rows are independent: each writes its own codes and scales.
  const int64_t band_elems = std::max<int64_t>(1, s.block_rows * s.cols);
  for_ranges(s.scale_rows(), std::max<int64_t>(1, (int64_t{1} << 20) / band_elems), [&](int64_t b0, int64_t b1) {
    for (int64_t bi = b0; bi < b1; ++bi) {
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
  });
  return out;
}

}  // namespace ds::qwen35::fp8
