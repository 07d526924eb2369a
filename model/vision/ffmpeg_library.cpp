#include "model/vision/ffmpeg_library.h"

#include <dlfcn.h>

#include <mutex>

extern "C" {
#include <libavcodec/version.h>
#include <libavformat/version.h>
#include <libavutil/macros.h>
#include <libavutil/version.h>
#include <libswscale/version.h>
}

#include "model/vision/image.h"

namespace ds::vision {

namespace {

enum Lib { avutil, avcodec, avformat, swscale };

const std::string kSonames[4] = {
    "libavutil.so." AV_STRINGIFY(LIBAVUTIL_VERSION_MAJOR),
    "libavcodec.so." AV_STRINGIFY(LIBAVCODEC_VERSION_MAJOR),
    "libavformat.so." AV_STRINGIFY(LIBAVFORMAT_VERSION_MAJOR),
    "libswscale.so." AV_STRINGIFY(LIBSWSCALE_VERSION_MAJOR),
};

std::string join(const std::string (&sonames)[4]) {
  return sonames[0] + ", " + sonames[1] + ", " + sonames[2] + ", " + sonames[3];
}

struct Loaded {
  FFmpeg table;
  std::string error;
};

const Loaded& loaded() {
  static Loaded l;
  static std::once_flag once;
  std::call_once(once, [] { l.error = load_ffmpeg(kSonames, l.table); });
  return l;
}

}  // namespace

std::string ffmpeg_sonames() { return join(kSonames); }

std::string load_ffmpeg(const std::string (&sonames)[4], FFmpeg& out) {
  // In dependency order; RTLD_NOW: a library that lacks a symbol fails here, not mid-request.
  // The handles are never closed (the table lives as long as the process).
  void* handles[4] = {};
  for (int i = 0; i < 4; ++i) {
    handles[i] = dlopen(sonames[i].c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handles[i]) {
      const char* why = dlerror();
      return "video needs FFmpeg's shared libraries (" + join(sonames) + "): " + (why ? std::string(why) : sonames[i] + " not found") +
             " (Debian / Ubuntu packages libavformat" + sonames[2].substr(sonames[2].rfind('.') + 1) +
             ", libswscale" + sonames[3].substr(sonames[3].rfind('.') + 1) + ")";
    }
  }
  std::string missing;
#define DS_FFMPEG_LOOKUP(lib, fn)                                                           \
  out.fn = reinterpret_cast<decltype(out.fn)>(dlsym(handles[lib], #fn));                   \
  if (!out.fn) missing += std::string(missing.empty() ? "" : ", ") + #fn;
  DS_FFMPEG_FUNCTIONS(DS_FFMPEG_LOOKUP)
#undef DS_FFMPEG_LOOKUP
  if (!missing.empty()) return "FFmpeg's libraries (" + join(sonames) + ") lack " + missing;
  return "";
}

const FFmpeg& ffmpeg() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw ImageError(l.error);
  return l.table;
}

std::string ffmpeg_status() { return loaded().error; }

}  // namespace ds::vision
