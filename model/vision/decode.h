// decode_image: bytes of a PNG, JPEG, WebP or GIF (the first frame) to RGB, with Debian's
// libpng, libjpeg-turbo, libwebp and giflib, converted as PIL's Image.convert("RGB") converts
// what HF's processor opens: alpha dropped (not composited), grey replicated, palettes looked
// up, 16-bit samples cut to their high byte; no EXIF rotation.
//
// The input is untrusted: every decoder reads the header first and refuses sizes past the
// limits before it allocates, checks the deadline between rows (and between JPEG scans),
// caps what a PNG's ancillary chunks may allocate, refuses animated WebP and CMYK JPEG, and
// stops a GIF after its first frame. Every refusal is an ImageError saying what is wrong.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>

#include "model/vision/image.h"

namespace ds::vision {

struct DecodeLimits {
  int64_t max_bytes = 32ll << 20;      // encoded size
  int64_t max_pixels = 64ll << 20;     // width * height
  int64_t max_side = 32768;            // width and height each
  std::chrono::milliseconds max_time{5000};
};

enum class ImageFormat : uint8_t { unknown, png, jpeg, webp, gif };
std::string_view format_name(ImageFormat f);
// By the first bytes (magic numbers), not by any name or MIME type a client gives.
ImageFormat sniff_format(std::span<const uint8_t> data);

RgbImage decode_image(std::span<const uint8_t> data, const DecodeLimits& limits = {});

namespace detail {
using Deadline = std::chrono::steady_clock::time_point;
// Throws ImageError unless width x height is within the limits.
void check_size(std::string_view format, int64_t width, int64_t height, const DecodeLimits& limits);
void check_deadline(std::string_view format, Deadline deadline, const DecodeLimits& limits);
RgbImage decode_png(std::span<const uint8_t> data, const DecodeLimits& limits, Deadline deadline);
RgbImage decode_jpeg(std::span<const uint8_t> data, const DecodeLimits& limits, Deadline deadline);
RgbImage decode_webp(std::span<const uint8_t> data, const DecodeLimits& limits, Deadline deadline);
RgbImage decode_gif(std::span<const uint8_t> data, const DecodeLimits& limits, Deadline deadline);
}  // namespace detail

}  // namespace ds::vision
