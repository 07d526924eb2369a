// JPEG through libjpeg-turbo with its defaults (the integer IDCT and fancy upsampling, what
// PIL decodes with), output as RGB (greyscale replicated). CMYK and YCCK are refused. A
// progress monitor enforces the deadline and caps the number of progressive scans (a file of
// thousands of tiny scans costs a full pass each). Errors leave through longjmp out of the
// library, as libjpeg expects.
// jpeglib.h needs size_t and FILE declared before it.
#include <cstddef>
#include <cstdio>

#include <jerror.h>
#include <jpeglib.h>

#include <csetjmp>
#include <cstdio>
#include <string>

#include "model/vision/decode.h"

namespace ds::vision::detail {
namespace {

constexpr int kMaxScans = 256;

struct JpegErrors {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
};

struct JpegProgress {
  jpeg_progress_mgr pub;
  Deadline deadline;
  bool late = false;
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings are tolerated (PIL tolerates them), except the end of the data before the image
// is complete: libjpeg would fill the rest with grey.
void jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_fail(cinfo);
}

void jpeg_progress(j_common_ptr cinfo) {
  auto* p = reinterpret_cast<JpegProgress*>(cinfo->progress);
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) {
    auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::snprintf(err->message, sizeof err->message, "more than %d scans", kMaxScans);
    std::longjmp(err->jump, 1);
  }
  if (std::chrono::steady_clock::now() > p->deadline) {
    p->late = true;
    auto* err = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::longjmp(err->jump, 1);
  }
}

struct JpegHandle {
  jpeg_decompress_struct cinfo{};
  bool created = false;
  ~JpegHandle() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

}  // namespace

RgbImage decode_jpeg(std::span<const uint8_t> data, const DecodeLimits& limits, Deadline deadline) {
  JpegErrors err;
  JpegProgress progress;
  JpegHandle h;
  RgbImage img;
  h.cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = jpeg_fail;
  err.pub.emit_message = jpeg_message;
  progress.pub.progress_monitor = jpeg_progress;
  progress.deadline = deadline;
  if (setjmp(err.jump)) {
    if (progress.late) check_deadline("JPEG", deadline, limits);
    throw ImageError(std::string("corrupt JPEG image: ") + err.message);
  }
  jpeg_create_decompress(&h.cinfo);
  h.created = true;
  h.cinfo.progress = &progress.pub;
  jpeg_mem_src(&h.cinfo, data.data(), static_cast<unsigned long>(data.size()));
  jpeg_read_header(&h.cinfo, TRUE);
  if (h.cinfo.jpeg_color_space == JCS_CMYK || h.cinfo.jpeg_color_space == JCS_YCCK)
    throw ImageError("CMYK JPEG images are not supported");
  check_size("JPEG", h.cinfo.image_width, h.cinfo.image_height, limits);
  h.cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&h.cinfo);
  if (h.cinfo.output_components != 3 || h.cinfo.output_width != h.cinfo.image_width ||
      h.cinfo.output_height != h.cinfo.image_height)
    throw ImageError("JPEG: unsupported pixel layout");
  img = RgbImage(h.cinfo.output_width, h.cinfo.output_height);
  while (h.cinfo.output_scanline < h.cinfo.output_height) {
    if ((h.cinfo.output_scanline & 63) == 0) check_deadline("JPEG", deadline, limits);
    JSAMPROW row = img.row(h.cinfo.output_scanline);
    jpeg_read_scanlines(&h.cinfo, &row, 1);
  }
  return img;
}

}  // namespace ds::vision::detail
