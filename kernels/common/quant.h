// Host-side encoders and decoders for the element types of K/V pools and weights.
//
// Q8_0 and Q4_0 follow ggml's reference quantisers bit for bit (quantize_row_q8_0_ref and
// quantize_row_q4_0_ref), so a pool written here reads the same as one written by
// llama.cpp, and the CUDA write kernel (kernels/cuda/kv_elements.cuh) is tested against
// these routines for exact equality:
//   Q8_0: d = amax / 127, id = 1/d (0 if d == 0), q = roundf(x * id), d stored as f16.
//   Q4_0: m = the element of largest magnitude, sign kept (the first one on ties);
//         d = m / -8, id = 1/d (0 if d == 0), q = min(15, (int8)(x * id + 8.5f)),
//         element j in the low nibble of qs[j], element j + 16 in the high nibble.
// Every product and sum is a separate float operation: ggml's reference is compiled without
// contraction, and a fused multiply-add would change the rounding of x * id + 8.5f.
// Decoding to double is exact for every type (d * q needs at most 19 significant bits).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/common/half.h"
#include "kernels/dtype.h"

namespace ds {

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[32];
};
struct BlockQ4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // low nibble: element j, high nibble: element j + 16; value = d * (q - 8)
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes");
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must be 18 bytes");

// One block of 32 floats to Q8_0.
inline BlockQ8_0 quantize_block_q8_0(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float a = std::fabs(x[j]);
    amax = amax > a ? amax : a;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ8_0 b;
  b.d = f32_to_f16(d);
  for (int j = 0; j < 32; ++j) {
    const volatile float x0 = x[j] * id;  // volatile: keep the product rounded to float
    b.qs[j] = static_cast<int8_t>(std::roundf(x0));
  }
  return b;
}

// One block of 32 floats to Q4_0.
inline BlockQ4_0 quantize_block_q4_0(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float a = std::fabs(x[j]);
    if (amax < a) {
      amax = a;
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ4_0 b;
  b.d = f32_to_f16(d);
  for (int j = 0; j < 16; ++j) {
    const volatile float x0 = x[j] * id;
    const volatile float x1 = x[j + 16] * id;
    const volatile float y0 = x0 + 8.5f;
    const volatile float y1 = x1 + 8.5f;
    const int q0 = std::min<int>(15, static_cast<int8_t>(y0));
    const int q1 = std::min<int>(15, static_cast<int8_t>(y1));
    b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
  return b;
}

inline double dequantize_q8_0(const BlockQ8_0& b, int j) {
  return static_cast<double>(f16_to_f32(b.d)) * b.qs[j];
}
inline double dequantize_q4_0(const BlockQ4_0& b, int j) {
  const int q = j < 16 ? (b.qs[j] & 0x0F) : (b.qs[j - 16] >> 4);
  return static_cast<double>(f16_to_f32(b.d)) * (q - 8);
}

namespace detail {
inline void check_row(DType t, int64_t n) {
  if (t == DType::fp8_e4m3 || t == DType::int4)
    throw std::invalid_argument(std::string(dtype_name(t)) + " is a weight type with group scales, not a row type");
  if (n < 0 || (is_quantized(t) && n % kQuantBlock != 0))
    throw std::invalid_argument("row of " + std::to_string(n) + " elements cannot be stored as " +
                                std::string(dtype_name(t)) + " (quantised rows need a multiple of 32)");
}
}  // namespace detail

// Stores n floats as one row of type t at dst (row_bytes(t, n) bytes; no alignment needed).
// bf16 and f16 round to nearest even.
inline void encode_row(DType t, const float* x, void* dst, int64_t n) {
  detail::check_row(t, n);
  auto* out = static_cast<uint8_t*>(dst);
  switch (t) {
    case DType::f32:
      std::memcpy(out, x, static_cast<size_t>(n) * 4);
      return;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::q8_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        const BlockQ8_0 blk = quantize_block_q8_0(x + 32 * b);
        std::memcpy(out + 34 * b, &blk, 34);
      }
      return;
    case DType::q4_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        const BlockQ4_0 blk = quantize_block_q4_0(x + 32 * b);
        std::memcpy(out + 18 * b, &blk, 18);
      }
      return;
    case DType::fp8_e4m3:
    case DType::int4:
      return;  // refused by check_row
  }
}

// Reads one row of n elements of type t at src into doubles (exact for every type).
inline void decode_row(DType t, const void* src, double* y, int64_t n) {
  detail::check_row(t, n);
  const auto* in = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::f32:
      for (int64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, in + 4 * i, 4);
        y[i] = f;
      }
      return;
    case DType::bf16:
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        y[i] = t == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
      return;
    case DType::q8_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, in + 34 * b, 34);
        for (int j = 0; j < 32; ++j) y[32 * b + j] = dequantize_q8_0(blk, j);
      }
      return;
    case DType::q4_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        BlockQ4_0 blk;
        std::memcpy(&blk, in + 18 * b, 18);
        for (int j = 0; j < 32; ++j) y[32 * b + j] = dequantize_q4_0(blk, j);
      }
      return;
    case DType::fp8_e4m3:
    case DType::int4:
      return;  // refused by check_row
  }
}

}  // namespace ds
