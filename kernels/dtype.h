// Element types the kernels and pools store, and how many bytes a row of them takes.
//
// Q8_0 and Q4_0 are ggml's block formats: 32 consecutive values along a row share one f16
// scale (Q8_0: d + 32 int8 = 34 bytes; Q4_0: d + 16 bytes of nibbles = 18 bytes, low nibble
// element j, high nibble element j+16, offset 8). A quantised row length must be a multiple
// of 32. Every size here is 64-bit: pools may exceed 2^32 elements and bytes.
//
// fp8_e4m3 is a weight type only: one float8_e4m3fn code per element, whose value is the code
// times a block scale the Tensor carries (kernels/tensor.h, Fp8Scales); a backend that keeps
// FP8 weights resident says so (Backend::fp8_weights). K/V pools never use it.
//
// int4 is a weight type only too: 4-bit codes 0..15, two per byte (the even column in the low
// nibble), whose value is scale * (code - zero) with a scale and zero per row and group of
// columns that the Tensor carries (kernels/tensor.h, Int4Groups): GPTQ and AWQ checkpoints
// (model/qwen35/int4.h) on a backend that keeps them (Backend::int4_weights).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ds {

enum class DType : uint8_t { f32, bf16, f16, q8_0, q4_0, fp8_e4m3, int4 };

inline constexpr int64_t kQuantBlock = 32;

inline constexpr bool is_quantized(DType t) { return t == DType::q8_0 || t == DType::q4_0; }

// Bytes of one row of n elements of type t (n a multiple of 32 for quantised types, even for
// int4).
inline constexpr int64_t row_bytes(DType t, int64_t n) {
  switch (t) {
    case DType::f32: return 4 * n;
    case DType::bf16:
    case DType::f16: return 2 * n;
    case DType::q8_0: return (n / kQuantBlock) * 34;
    case DType::q4_0: return (n / kQuantBlock) * 18;
    case DType::fp8_e4m3: return n;
    case DType::int4: return n / 2;
  }
  return 0;
}

inline constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::q8_0: return "q8_0";
    case DType::q4_0: return "q4_0";
    case DType::fp8_e4m3: return "fp8_e4m3";
    case DType::int4: return "int4";
  }
  return "?";
}

inline DType parse_dtype(std::string_view s) {
  if (s == "f32" || s == "float32" || s == "fp32") return DType::f32;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "f16" || s == "float16" || s == "fp16" || s == "half") return DType::f16;
  if (s == "q8_0") return DType::q8_0;
  if (s == "q4_0") return DType::q4_0;
  throw std::invalid_argument("unknown element type '" + std::string(s) +
                              "' (expected f32, bf16, f16, q8_0 or q4_0)");
}

}  // namespace ds
