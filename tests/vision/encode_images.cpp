#include "encode_images.h"

#include <cstddef>
#include <cstdio>

#include <gif_lib.h>
#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

namespace ds::vision::test {

RgbImage picture(int64_t width, int64_t height, uint32_t seed) {
  RgbImage img(width, height);
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0, 10);
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x) {
      const double v[3] = {255.0 * x / std::max<int64_t>(width - 1, 1), 255.0 * y / std::max<int64_t>(height - 1, 1),
                           127.5 + 127.5 * std::sin((x + 2.0 * y) / 5.0)};
      for (int c = 0; c < 3; ++c)
        img.row(y)[3 * x + c] = static_cast<uint8_t>(std::clamp(std::lround(v[c] + noise(rng)), 0l, 255l));
    }
  return img;
}

namespace {
void png_write(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}
void png_flush(png_structp) {}

std::vector<uint8_t> write_png(int64_t width, int64_t height, int color_type, int bit_depth, bool interlaced,
                               const std::vector<uint8_t>& rows_bytes, const std::vector<uint8_t>* palette) {
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw std::runtime_error("encode_png failed");
  }
  png_set_write_fn(png, &out, png_write, png_flush);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), bit_depth, color_type,
               interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  std::vector<png_color> pal;
  if (palette) {
    for (size_t i = 0; i + 2 < palette->size(); i += 3) pal.push_back({(*palette)[i], (*palette)[i + 1], (*palette)[i + 2]});
    png_set_PLTE(png, info, pal.data(), static_cast<int>(pal.size()));
  }
  png_write_info(png, info);
  const size_t stride = rows_bytes.size() / static_cast<size_t>(height);
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int64_t y = 0; y < height; ++y) rows[static_cast<size_t>(y)] = const_cast<png_bytep>(rows_bytes.data() + y * stride);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}
}  // namespace

std::vector<uint8_t> encode_png(int64_t width, int64_t height, int channels, const std::vector<uint8_t>& pixels,
                                int bit_depth, bool interlaced) {
  static const int types[] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                              PNG_COLOR_TYPE_RGBA};
  std::vector<uint8_t> bytes = pixels;
  if (bit_depth == 16) {  // big-endian samples whose two bytes are equal
    bytes.clear();
    for (uint8_t v : pixels) {
      bytes.push_back(v);
      bytes.push_back(v);
    }
  }
  return write_png(width, height, types[channels], bit_depth, interlaced, bytes, nullptr);
}

std::vector<uint8_t> encode_png_palette(int64_t width, int64_t height, const std::vector<uint8_t>& indices,
                                        const std::vector<uint8_t>& palette) {
  return write_png(width, height, PNG_COLOR_TYPE_PALETTE, 8, false, indices, &palette);
}

std::vector<uint8_t> encode_jpeg(const RgbImage& img, int quality, bool gray) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(img.width);
  c.image_height = static_cast<JDIMENSION>(img.height);
  c.input_components = gray ? 1 : 3;
  c.in_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  std::vector<uint8_t> row(static_cast<size_t>(img.width * 3));
  while (c.next_scanline < c.image_height) {
    const uint8_t* src = img.row(c.next_scanline);
    if (gray)
      for (int64_t x = 0; x < img.width; ++x) row[static_cast<size_t>(x)] = src[3 * x];
    else
      std::memcpy(row.data(), src, row.size());
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  free(buf);
  return out;
}

std::vector<uint8_t> encode_webp_lossless(const RgbImage& img) {
  uint8_t* out = nullptr;
  const size_t n = WebPEncodeLosslessRGB(img.rgb.data(), static_cast<int>(img.width), static_cast<int>(img.height),
                                         static_cast<int>(img.width * 3), &out);
  if (n == 0) throw std::runtime_error("encode_webp_lossless failed");
  std::vector<uint8_t> v(out, out + n);
  WebPFree(out);
  return v;
}

namespace {
int gif_write(GifFileType* gif, const GifByteType* data, int n) {
  auto* out = static_cast<std::vector<uint8_t>*>(gif->UserData);
  out->insert(out->end(), data, data + n);
  return n;
}
ColorMapObject* make_map(const std::vector<uint8_t>& pal) {
  std::vector<GifColorType> colors;
  for (size_t i = 0; i + 2 < pal.size(); i += 3) colors.push_back({pal[i], pal[i + 1], pal[i + 2]});
  return GifMakeMapObject(static_cast<int>(colors.size()), colors.data());
}
}  // namespace

std::vector<uint8_t> encode_gif(int width, int height, const std::vector<uint8_t>& global_palette,
                                const std::vector<GifFrame>& frames) {
  std::vector<uint8_t> out;
  int err = 0;
  GifFileType* gif = EGifOpen(&out, gif_write, &err);
  if (!gif) throw std::runtime_error("EGifOpen failed");
  EGifSetGifVersion(gif, true);
  ColorMapObject* gmap = make_map(global_palette);
  if (EGifPutScreenDesc(gif, width, height, 8, 0, gmap) == GIF_ERROR) throw std::runtime_error("gif screen");
  GifFreeMapObject(gmap);
  for (const GifFrame& f : frames) {
    ColorMapObject* lmap = f.palette.empty() ? nullptr : make_map(f.palette);
    // giflib 5.2's EGifPutImageDesc drops the previous frame's local map without freeing it
    // when this frame has none (LeakSanitizer finds it): free it here.
    if (!lmap && gif->Image.ColorMap) {
      GifFreeMapObject(gif->Image.ColorMap);
      gif->Image.ColorMap = nullptr;
    }
    if (EGifPutImageDesc(gif, f.left, f.top, f.width, f.height, f.interlaced, lmap) == GIF_ERROR)
      throw std::runtime_error("gif frame");
    if (lmap) GifFreeMapObject(lmap);
    // Interlaced frames take their rows in pass order.
    std::vector<int> order;
    if (f.interlaced) {
      static const int start[] = {0, 4, 2, 1}, step[] = {8, 8, 4, 2};
      for (int p = 0; p < 4; ++p)
        for (int y = start[p]; y < f.height; y += step[p]) order.push_back(y);
    } else {
      for (int y = 0; y < f.height; ++y) order.push_back(y);
    }
    for (int y : order)
      if (EGifPutLine(gif, const_cast<GifPixelType*>(f.indices.data() + y * f.width), f.width) == GIF_ERROR)
        throw std::runtime_error("gif line");
  }
  EGifCloseFile(gif, &err);
  return out;
}

}  // namespace ds::vision::test
