// FP8 weights: the float8_e4m3fn codec and block-wise (de)quantisation of a matrix, as Qwen's
// -FP8 releases store them (HF transformers' "fine-grained FP8", DeepSeek-V3's layout).
//
// e4m3fn: sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN,
// so the largest finite value is 448 (S.1111.110); exponent 0 holds subnormals m/8 * 2^-6.
//
// A quantised [rows, cols] weight W is stored as codes Q (one byte each, row-major) and a
// scale per block of block_rows x block_cols elements, S [ceil(rows/br), ceil(cols/bc)]
// (the checkpoint's `<name>_scale_inv`; blocks at the right and bottom edges may be partial).
// The value is decode(Q[i][j]) * S[i/br][j/bc], computed in f32: that product is what the
// CPU backend holds, and what a device backend narrows to its weight type.
//
// Quantising (serve --quantization fp8 on a bf16 checkpoint) uses the scale amax/448 per
// block (an all-zero block gets scale 1), divides by it and rounds to the nearest e4m3 value
// (ties to an even mantissa, saturating at +-448), as HF transformers' FP8 quantiser does.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace ds::qwen35::fp8 {

inline constexpr float kE4m3Max = 448.0f;
// The block edge of Qwen's releases and of --quantization fp8.
inline constexpr int64_t kBlock = 128;

// The value of one e4m3fn code (NaN for 0x7f and 0xff).
float e4m3_to_f32(uint8_t code);
// The nearest e4m3fn code to x (ties to even mantissa); |x| >= 448 saturates to +-448, NaN
// gives 0x7f.
uint8_t f32_to_e4m3(float x);

// Block geometry of one weight: [rows, cols] in blocks of [block_rows, block_cols].
struct BlockShape {
  int64_t rows = 0, cols = 0;
  int64_t block_rows = kBlock, block_cols = kBlock;
  int64_t scale_rows() const { return (rows + block_rows - 1) / block_rows; }
  int64_t scale_cols() const { return (cols + block_cols - 1) / block_cols; }
};

// W[i][j] = e4m3_to_f32(codes[i*cols + j]) * scales[(i/br)*scale_cols + j/bc].
std::vector<float> dequantize(const BlockShape& shape, std::span<const uint8_t> codes, std::span<const float> scales);

struct Quantized {
  std::vector<uint8_t> codes;  // [rows * cols]
  std::vector<float> scales;   // [scale_rows * scale_cols]
};
// On up to the machine's hardware threads (bands of block rows; the result does not depend on
// the split): --quantization fp8 runs it over every linear weight of the model at load.
Quantized quantize(const BlockShape& shape, std::span<const float> values);

// fn(begin, end) over contiguous ranges covering [0, n), on up to the machine's hardware
// threads (the caller runs the first), at least min_per_thread items each; returns when all
// are done.
void for_ranges(int64_t n, int64_t min_per_thread, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace ds::qwen35::fp8
