// Device-side element codecs for K/V rows: f16/bf16 bit conversions and ggml's Q8_0/Q4_0
// reference quantisers, written as plain device code so they build with nvcc and hipcc.
//
// The quantisers must produce the same bytes as kernels/common/quant.h (the host twin):
// the float operations are spelled with __fmul_rn/__fadd_rn so the compiler cannot fuse
// x * id + 8.5f into one rounding, 1.0f / d is IEEE division (nvcc's default -prec-div),
// and the f16 scale is rounded to nearest even by the same bit algorithm as the host.
#pragma once

#include <cstdint>

#include "kernels/dtype.h"
#include "kernels/common/gpu_runtime.h"

namespace ds::cuda::detail {

__device__ __forceinline__ float bf16_bits_to_f32(uint32_t h) { return __uint_as_float(h << 16); }

__device__ __forceinline__ float f16_bits_to_f32(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
  return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  const uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ uint16_t f32_to_f16_bits(float f) {
  const uint32_t bits = __float_as_uint(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {
    if (abs < 0x33000000u) return sign;
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u);
  r -= 0x38000000u;
  return static_cast<uint16_t>(sign | (r >> 13));
}

__device__ __forceinline__ void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}
__device__ __forceinline__ uint32_t load_u16(const uint8_t* p) { return p[0] | (uint32_t{p[1]} << 8); }

// 32 floats -> one 34-byte Q8_0 block at out.
__device__ inline void quantize_q8_0(const float* x, uint8_t* out) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float a = fabsf(x[j]);
    amax = amax > a ? amax : a;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(out, f32_to_f16_bits(d));
  for (int j = 0; j < 32; ++j) {
    const int8_t q = static_cast<int8_t>(roundf(__fmul_rn(x[j], id)));
    out[2 + j] = static_cast<uint8_t>(q);
  }
}

// 32 floats -> one 18-byte Q4_0 block at out.
__device__ inline void quantize_q4_0(const float* x, uint8_t* out) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float a = fabsf(x[j]);
    if (amax < a) {
      amax = a;
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(out, f32_to_f16_bits(d));
  for (int j = 0; j < 16; ++j) {
    const int q0 = min(15, static_cast<int>(static_cast<int8_t>(__fadd_rn(__fmul_rn(x[j], id), 8.5f))));
    const int q1 = min(15, static_cast<int>(static_cast<int8_t>(__fadd_rn(__fmul_rn(x[j + 16], id), 8.5f))));
    out[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// Element d of a row of type t (slow path for the portable kernel; d < head_dim).
__device__ inline float load_element(DType t, const uint8_t* row, int d) {
  switch (t) {
    case DType::f32:
      return reinterpret_cast<const float*>(row)[d];
    case DType::bf16:
      return bf16_bits_to_f32(reinterpret_cast<const uint16_t*>(row)[d]);
    case DType::f16:
      return f16_bits_to_f32(reinterpret_cast<const uint16_t*>(row)[d]);
    case DType::q8_0: {
      const uint8_t* blk = row + 34 * (d / 32);
      return f16_bits_to_f32(load_u16(blk)) * static_cast<float>(static_cast<int8_t>(blk[2 + d % 32]));
    }
    case DType::q4_0: {
      const uint8_t* blk = row + 18 * (d / 32);
      const int j = d % 32;
      const int q = j < 16 ? (blk[2 + j] & 0x0F) : (blk[2 + j - 16] >> 4);
      return f16_bits_to_f32(load_u16(blk)) * static_cast<float>(q - 8);
    }
    case DType::fp8_e4m3:
      break;  // a weight type, never a K/V row
  }
  return 0.0f;
}

}  // namespace ds::cuda::detail
