// WebP (lossy or lossless, still) through libwebp's incremental decoder, fed in pieces so the
// deadline is checked while it works. RGB output drops alpha without premultiplying, as PIL's
// RGBA -> RGB does. Animated WebP is refused.
#include <webp/decode.h>

#include <algorithm>

#include "model/vision/decode.h"

namespace ds::vision::detail {
namespace {

struct IncrementalDecoder {
  WebPIDecoder* dec = nullptr;
  ~IncrementalDecoder() {
    if (dec) WebPIDelete(dec);
  }
};

}  // namespace

RgbImage decode_webp(std::span<const uint8_t> data, const DecodeLimits& limits, Deadline deadline) {
  WebPBitstreamFeatures f;
  if (WebPGetFeatures(data.data(), data.size(), &f) != VP8_STATUS_OK) throw ImageError("corrupt WebP image");
  if (f.has_animation) throw ImageError("animated WebP images are not supported");
  check_size("WebP", f.width, f.height, limits);
  RgbImage img(f.width, f.height);
  IncrementalDecoder d;
  d.dec = WebPINewRGB(MODE_RGB, img.rgb.data(), img.rgb.size(), static_cast<int>(f.width * 3));
  if (!d.dec) throw ImageError("WebP: out of memory");
  constexpr size_t kPiece = 64 << 10;
  for (size_t at = 0; at < data.size(); at += kPiece) {
    check_deadline("WebP", deadline, limits);
    const VP8StatusCode s = WebPIAppend(d.dec, data.data() + at, std::min(kPiece, data.size() - at));
    if (s == VP8_STATUS_OK) return img;
    if (s != VP8_STATUS_SUSPENDED) throw ImageError("corrupt WebP image");
  }
  throw ImageError("truncated WebP image");
}

}  // namespace ds::vision::detail
