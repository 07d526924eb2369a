// Fuzz target: video bytes a client sends -> what the server does with them before the model:
// FFmpeg's demuxers and decoders over memory (model/vision/video_decode.h, under tight
// limits), the frame sampling and the video processor (video_processor.h: the clip's resize
// target, the per-frame resize, the temporal patches and their rows) and the timestamps.
// Invariant: bad input is an ImageError (a 400 for the client) or nothing; any other
// exception escapes and is reported as a crash, as are sanitizer findings; the frames are the
// chosen ones, each width x height x 3 bytes, and every temporal patch has its timestamp.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <utility>
#include <vector>

#include "model/vision/video_decode.h"
#include "model/vision/video_processor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ds;
  vision::VideoLimits lim;
  lim.max_bytes = 1 << 20;
  lim.max_seconds = 60;
  lim.max_frames = 256;
  lim.max_pixels = 256 * 256;
  lim.max_side = 1024;
  lim.max_time = std::chrono::milliseconds(1000);
  lim.threads = 1;
  vision::VideoProcessorConfig proc;
  proc.image.patch_size = 16;
  proc.image.min_pixels = 4096;
  proc.image.max_pixels = 65536;
  proc.max_frames = 16;
  try {
    vision::DecodedVideo v = vision::decode_video(std::span<const uint8_t>(data, size), lim,
                                                  vision::frame_chooser(proc, {}), vision::frame_resizer(proc));
    if (v.frames.size() != v.indices.size()) std::abort();
    for (const vision::RgbImage& f : v.frames)
      if (f.width != v.frames[0].width || f.height != v.frames[0].height ||
          f.rgb.size() != static_cast<size_t>(f.pixels() * 3))
        std::abort();
    const vision::ProcessedVideo p = vision::preprocess_video(std::move(v), proc);
    if (p.patches.size() != p.timestamps.size()) std::abort();
    for (const vision::ProcessedImage& im : p.patches) {
      const int64_t temporal = proc.image.temporal_patch_size;
      std::vector<float> rows(static_cast<size_t>(im.num_patches() * proc.image.patch_values() * temporal));
      vision::write_patches(im, proc.image, temporal, rows);
    }
  } catch (const vision::ImageError&) {
  }
  return 0;
}
