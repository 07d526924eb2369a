#include "model/vision/decode.h"

#include <cstring>
#include <string>

namespace ds::vision {

std::string_view format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::png: return "PNG";
    case ImageFormat::jpeg: return "JPEG";
    case ImageFormat::webp: return "WebP";
    case ImageFormat::gif: return "GIF";
    case ImageFormat::unknown: break;
  }
  return "unknown";
}

ImageFormat sniff_format(std::span<const uint8_t> d) {
  auto starts = [&](const char* magic, size_t at = 0) {
    const size_t n = std::strlen(magic);
    return d.size() >= at + n && std::memcmp(d.data() + at, magic, n) == 0;
  };
  if (starts("\x89PNG\r\n\x1a\n")) return ImageFormat::png;
  if (d.size() >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return ImageFormat::jpeg;
  if (starts("RIFF") && starts("WEBP", 8)) return ImageFormat::webp;
  if (starts("GIF87a") || starts("GIF89a")) return ImageFormat::gif;
  return ImageFormat::unknown;
}

namespace detail {

void check_size(std::string_view format, int64_t width, int64_t height, const DecodeLimits& limits) {
  const std::string f(format);
  if (width <= 0 || height <= 0) throw ImageError(f + " image has no pixels (" + std::to_string(width) + "x" +
                                                  std::to_string(height) + ")");
  if (width > limits.max_side || height > limits.max_side)
    throw ImageError(f + " image of " + std::to_string(width) + "x" + std::to_string(height) +
                     " pixels: each side may be at most " + std::to_string(limits.max_side));
  if (width * height > limits.max_pixels)
    throw ImageError(f + " image of " + std::to_string(width) + "x" + std::to_string(height) + " = " +
                     std::to_string(width * height) + " pixels: at most " + std::to_string(limits.max_pixels) +
                     " are allowed");
}

void check_deadline(std::string_view format, Deadline deadline, const DecodeLimits& limits) {
  if (std::chrono::steady_clock::now() > deadline)
    throw ImageError(std::string(format) + " image took longer than " + std::to_string(limits.max_time.count()) +
                     " ms to decode");
}

}  // namespace detail

RgbImage decode_image(std::span<const uint8_t> data, const DecodeLimits& limits) {
  if (data.empty()) throw ImageError("the image is empty (0 bytes)");
  if (static_cast<int64_t>(data.size()) > limits.max_bytes)
    throw ImageError("the image is " + std::to_string(data.size()) + " bytes; at most " +
                     std::to_string(limits.max_bytes) + " are allowed");
  const auto deadline = std::chrono::steady_clock::now() + limits.max_time;
  switch (sniff_format(data)) {
    case ImageFormat::png: return detail::decode_png(data, limits, deadline);
    case ImageFormat::jpeg: return detail::decode_jpeg(data, limits, deadline);
    case ImageFormat::webp: return detail::decode_webp(data, limits, deadline);
    case ImageFormat::gif: return detail::decode_gif(data, limits, deadline);
    case ImageFormat::unknown: break;
  }
  throw ImageError("unsupported image format (PNG, JPEG, WebP and GIF are supported)");
}

}  // namespace ds::vision
