// GIF: the first frame only, read record by record with giflib (never DGifSlurp, which would
// inflate every frame of an animation). As PIL's first frame: a canvas of the logical screen
// filled with the frame's transparent index (or index 0), the frame's pixels drawn at its
// offset, then every index looked up in the frame's colour map (its own, else the global
// one); transparency itself is ignored, as PIL's "P" -> "RGB" ignores it.
#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "model/vision/decode.h"

namespace ds::vision::detail {
namespace {

struct GifSource {
  std::span<const uint8_t> data;
  size_t pos = 0;
};

int gif_read(GifFileType* gif, GifByteType* out, int n) {
  auto* src = static_cast<GifSource*>(gif->UserData);
  const size_t k = std::min(static_cast<size_t>(std::max(n, 0)), src->data.size() - src->pos);
  std::memcpy(out, src->data.data() + src->pos, k);
  src->pos += k;
  return static_cast<int>(k);
}

struct GifHandle {
  GifFileType* gif = nullptr;
  ~GifHandle() {
    int err = 0;
    if (gif) DGifCloseFile(gif, &err);
  }
};

[[noreturn]] void gif_fail(const GifHandle& h, const char* what) {
  const char* why = h.gif ? GifErrorString(h.gif->Error) : nullptr;
  throw ImageError(std::string("corrupt GIF image: ") + what + (why ? std::string(" (") + why + ")" : ""));
}

}  // namespace

RgbImage decode_gif(std::span<const uint8_t> data, const DecodeLimits& limits, Deadline deadline) {
  GifSource src{data};
  GifHandle h;
  int err = 0;
  h.gif = DGifOpen(&src, gif_read, &err);
  if (!h.gif) throw ImageError(std::string("corrupt GIF image: ") + (GifErrorString(err) ? GifErrorString(err) : "?"));
  const int64_t sw = h.gif->SWidth, sh = h.gif->SHeight;
  check_size("GIF", sw, sh, limits);
  int transparent = -1;
  for (;;) {
    check_deadline("GIF", deadline, limits);
    GifRecordType type;
    if (DGifGetRecordType(h.gif, &type) == GIF_ERROR) gif_fail(h, "bad record");
    if (type == TERMINATE_RECORD_TYPE) throw ImageError("GIF image has no frame");
    if (type == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* ext = nullptr;
      if (DGifGetExtension(h.gif, &code, &ext) == GIF_ERROR) gif_fail(h, "bad extension");
      if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4 && (ext[1] & 1)) transparent = ext[4];
      while (ext) {
        check_deadline("GIF", deadline, limits);
        if (DGifGetExtensionNext(h.gif, &ext) == GIF_ERROR) gif_fail(h, "bad extension");
      }
      continue;
    }
    if (type != IMAGE_DESC_RECORD_TYPE) continue;
    if (DGifGetImageDesc(h.gif) == GIF_ERROR) gif_fail(h, "bad frame header");
    const GifImageDesc& f = h.gif->Image;
    const ColorMapObject* map = f.ColorMap ? f.ColorMap : h.gif->SColorMap;
    if (!map) throw ImageError("GIF frame has no colour map");
    check_size("GIF frame", f.Width, f.Height, limits);
    std::vector<uint8_t> index(static_cast<size_t>(sw * sh), static_cast<uint8_t>(transparent >= 0 ? transparent : 0));
    std::vector<GifPixelType> line(static_cast<size_t>(f.Width));
    // Interlaced frames store rows in four passes: every 8th from 0, every 8th from 4, every
    // 4th from 2, every 2nd from 1.
    static constexpr int kStart[] = {0, 4, 2, 1}, kStep[] = {8, 8, 4, 2};
    const int passes = f.Interlace ? 4 : 1;
    for (int p = 0; p < passes; ++p) {
      for (int64_t y = f.Interlace ? kStart[p] : 0; y < f.Height; y += f.Interlace ? kStep[p] : 1) {
        if ((y & 63) == 0) check_deadline("GIF", deadline, limits);
        if (DGifGetLine(h.gif, line.data(), f.Width) == GIF_ERROR) gif_fail(h, "bad pixel data");
        const int64_t cy = f.Top + y;
        if (cy < 0 || cy >= sh) continue;
        for (int64_t x = 0; x < f.Width; ++x) {
          const int64_t cx = f.Left + x;
          if (cx >= 0 && cx < sw) index[static_cast<size_t>(cy * sw + cx)] = line[static_cast<size_t>(x)];
        }
      }
    }
    RgbImage img(sw, sh);
    for (int64_t i = 0; i < sw * sh; ++i) {
      const int k = index[static_cast<size_t>(i)];
      uint8_t* px = img.rgb.data() + 3 * i;
      if (k < map->ColorCount) {
        px[0] = map->Colors[k].Red;
        px[1] = map->Colors[k].Green;
        px[2] = map->Colors[k].Blue;
      } else {
        px[0] = px[1] = px[2] = 0;
      }
    }
    return img;
  }
}

}  // namespace ds::vision::detail
