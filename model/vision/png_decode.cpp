// PNG through libpng's progressive row reader, converted to 8-bit RGB as PIL does (see
// decode.h). libpng reports errors by longjmp: the only objects alive across it are this
// frame's, so nothing leaks; the error message is copied out before the jump.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

#include "model/vision/decode.h"

namespace ds::vision::detail {
namespace {

struct PngSource {
  std::span<const uint8_t> data;
  size_t pos = 0;
  char message[256] = {};
};

void png_read(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->data.size() - src->pos) png_error(png, "truncated");
  std::memcpy(out, src->data.data() + src->pos, n);
  src->pos += n;
}

void png_fail(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof src->message, "%s", msg ? msg : "error");
  png_longjmp(png, 1);
}

void png_warn(png_structp, png_const_charp) {}

struct PngHandles {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngHandles() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

}  // namespace

RgbImage decode_png(std::span<const uint8_t> data, const DecodeLimits& limits, Deadline deadline) {
  PngSource src{data};
  PngHandles h;
  RgbImage img;
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_fail, png_warn);
  if (!h.png) throw ImageError("PNG: out of memory");
  h.info = png_create_info_struct(h.png);
  if (!h.info) throw ImageError("PNG: out of memory");
  if (setjmp(png_jmpbuf(h.png))) throw ImageError(std::string("corrupt PNG image: ") + src.message);
  // Ancillary chunks (text, ICC profiles) are compressed too: cap what one may inflate to.
  png_set_chunk_malloc_max(h.png, 8 << 20);
  png_set_chunk_cache_max(h.png, 512);
  png_set_user_limits(h.png, static_cast<png_uint_32>(limits.max_side), static_cast<png_uint_32>(limits.max_side));
  png_set_read_fn(h.png, &src, png_read);
  png_read_info(h.png, h.info);
  const png_uint_32 width = png_get_image_width(h.png, h.info), height = png_get_image_height(h.png, h.info);
  check_size("PNG", width, height, limits);
  const int color = png_get_color_type(h.png, h.info), depth = png_get_bit_depth(h.png, h.info);
  if (depth == 16) png_set_strip_16(h.png);  // the high byte, as PIL reads 16-bit samples
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(h.png);  // tRNS ignored, as PIL's "P" -> "RGB"
  if ((color & PNG_COLOR_MASK_COLOR) == 0) {
    if (depth < 8) png_set_expand_gray_1_2_4_to_8(h.png);
    png_set_gray_to_rgb(h.png);
  }
  // Expanding a palette also turns its tRNS into alpha: drop that as the stored alpha.
  if ((color & PNG_COLOR_MASK_ALPHA) || (color == PNG_COLOR_TYPE_PALETTE && png_get_valid(h.png, h.info, PNG_INFO_tRNS)))
    png_set_strip_alpha(h.png);
  const int passes = png_set_interlace_handling(h.png);
  png_read_update_info(h.png, h.info);
  if (png_get_rowbytes(h.png, h.info) != static_cast<size_t>(width) * 3)
    throw ImageError("PNG: unsupported pixel layout");
  img = RgbImage(width, height);
  for (int pass = 0; pass < passes; ++pass) {
    for (png_uint_32 y = 0; y < height; ++y) {
      if ((y & 63) == 0) check_deadline("PNG", deadline, limits);
      png_read_row(h.png, img.row(y), nullptr);
    }
  }
  return img;
}

}  // namespace ds::vision::detail
