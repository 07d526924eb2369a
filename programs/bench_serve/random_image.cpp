#include "programs/bench_serve/random_image.h"

#include <cstdio>
// jpeglib.h needs FILE and size_t declared before it.
#include <jpeglib.h>

#include <cstdlib>
#include <random>
#include <stdexcept>

namespace ds::bench {

std::vector<uint8_t> random_jpeg(int width, int height, uint64_t seed) {
  if (width < 1 || height < 1) throw std::invalid_argument("random_jpeg: empty image");
  constexpr int kTile = 32;
  const int tiles_x = (width + kTile - 1) / kTile;
  const int tiles_y = (height + kTile - 1) / kTile;
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + 0x2545f4914f6cdd1dULL);
  std::vector<uint8_t> colours(static_cast<size_t>(tiles_x) * tiles_y * 3);
  for (auto& c : colours) c = static_cast<uint8_t>(rng() >> 56);
  std::vector<uint8_t> row(static_cast<size_t>(width) * 3);

  jpeg_compress_struct cinfo{};
  jpeg_error_mgr jerr{};
  cinfo.err = jpeg_std_error(&jerr);  // libjpeg's default handler exits: only on out-of-memory here
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 85, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  for (int y = 0; y < height; ++y) {
    const uint8_t* tile_row = colours.data() + static_cast<size_t>(y / kTile) * tiles_x * 3;
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) row[static_cast<size_t>(x) * 3 + c] = tile_row[(x / kTile) * 3 + c];
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&cinfo, &r, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::vector<uint8_t> out(buffer, buffer + size);
  jpeg_destroy_compress(&cinfo);
  std::free(buffer);
  return out;
}

std::string jpeg_data_url(const std::vector<uint8_t>& jpeg) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out = "data:image/jpeg;base64,";
  out.reserve(out.size() + (jpeg.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= jpeg.size(); i += 3) {
    const uint32_t v = (uint32_t{jpeg[i]} << 16) | (uint32_t{jpeg[i + 1]} << 8) | jpeg[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (const size_t rest = jpeg.size() - i; rest > 0) {
    const uint32_t v = (uint32_t{jpeg[i]} << 16) | (rest == 2 ? uint32_t{jpeg[i + 1]} << 8 : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool parse_image_size(const std::string& text, int& width, int& height) {
  const size_t x = text.find_first_of("xX");
  if (x == std::string::npos || x == 0 || x + 1 >= text.size()) return false;
  auto side = [](const std::string& s, int& v) {
    if (s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    v = std::stoi(s);
    return v >= 1 && v <= 16384;
  };
  return side(text.substr(0, x), width) && side(text.substr(x + 1), height);
}

}  // namespace ds::bench
