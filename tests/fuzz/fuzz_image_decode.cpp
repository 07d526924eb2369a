// Fuzz target: image bytes a client sends -> what the server does with them before the model:
// the format sniffing and the four decoders (model/vision/decode.h, under tight limits), then
// the image processor (smart_resize, the bicubic resize, the patch rows); and the same bytes
// read as the base64 of a data: URL (server/base64.h). Invariant: bad input is an ImageError
// (a 400 for the client) or nothing; any other exception escapes and is reported as a crash,
// as are sanitizer findings, and a decoded image holds exactly width x height x 3 bytes.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

#include "model/vision/decode.h"
#include "model/vision/processor.h"
#include "server/base64.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ds;
  std::vector<uint8_t> b64;
  server::decode_base64(std::string_view(reinterpret_cast<const char*>(data), size), b64);
  vision::DecodeLimits lim;
  lim.max_bytes = 1 << 20;
  lim.max_pixels = 1 << 20;
  lim.max_side = 4096;
  lim.max_time = std::chrono::milliseconds(500);
  vision::ImageProcessorConfig proc;
  proc.patch_size = 16;
  proc.min_pixels = 1024;
  proc.max_pixels = 65536;
  try {
    const vision::RgbImage img = vision::decode_image(std::span<const uint8_t>(data, size), lim);
    if (img.rgb.size() != static_cast<size_t>(img.width * img.height * 3)) std::abort();
    const vision::ProcessedImage p = vision::preprocess(img, proc);
    std::vector<float> patches(static_cast<size_t>(p.num_patches() * proc.patch_values()));
    vision::write_patches(p, proc, 1, patches);
  } catch (const vision::ImageError&) {
  }
  return 0;
}
