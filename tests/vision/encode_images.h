// Test images made in memory with the libraries the decoders use (libpng, libjpeg, libwebp,
// giflib), so the decoders can be checked without fixture files.
#pragma once

#include <cstdint>
#include <vector>

#include "model/vision/image.h"

namespace ds::vision::test {

// A deterministic RGB picture with detail at every scale.
RgbImage picture(int64_t width, int64_t height, uint32_t seed);

// color_type: PNG_COLOR_TYPE_*; channels taken from `pixels` (1 gray, 2 gray+alpha, 3 RGB,
// 4 RGBA), 8 or 16 bits (16: each byte doubled), optionally interlaced.
std::vector<uint8_t> encode_png(int64_t width, int64_t height, int channels, const std::vector<uint8_t>& pixels,
                                int bit_depth = 8, bool interlaced = false);
// A palette PNG: 8-bit indices into `palette` (RGB triplets).
std::vector<uint8_t> encode_png_palette(int64_t width, int64_t height, const std::vector<uint8_t>& indices,
                                        const std::vector<uint8_t>& palette);
std::vector<uint8_t> encode_jpeg(const RgbImage& img, int quality, bool gray = false);
std::vector<uint8_t> encode_webp_lossless(const RgbImage& img);
// GIF frames over a screen; each frame: offset, size, indices, its own colour map (or the
// global one when empty).
struct GifFrame {
  int left = 0, top = 0, width = 0, height = 0;
  std::vector<uint8_t> indices;
  std::vector<uint8_t> palette;  // RGB triplets, 2^k entries; empty = global
  bool interlaced = false;
};
std::vector<uint8_t> encode_gif(int width, int height, const std::vector<uint8_t>& global_palette,
                                const std::vector<GifFrame>& frames);

}  // namespace ds::vision::test
