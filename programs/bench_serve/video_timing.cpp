#include "programs/bench_serve/video_timing.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "model/vision/video_decode.h"
#include "model/vision/video_processor.h"

namespace ds::bench {

std::string VideoHostTiming::summary() const {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "video on the host (released video processor: 2 fps, 4096 .. 25165824 pixels): %lld frames -> %lld kept, "
                "%lld pairs of %lldx%lld, %lld tokens; decode %.1f ms, preprocess %.1f ms (medians)",
                static_cast<long long>(total_frames), static_cast<long long>(kept_frames), static_cast<long long>(pairs),
                static_cast<long long>(width), static_cast<long long>(height), static_cast<long long>(tokens), decode_ms,
                preprocess_ms);
  return buf;
}

VideoHostTiming time_video_host(const std::vector<uint8_t>& mp4, int repeats) {
  vision::VideoProcessorConfig c;
  c.image.min_pixels = 4096;
  c.image.max_pixels = 25165824;
  c.image.patch_size = 16;
  c.image.mean = c.image.std = {0.5f, 0.5f, 0.5f};
  vision::VideoLimits lim;
  lim.max_bytes = int64_t{1} << 30;
  lim.max_pixels = int64_t{4096} * 4096;
  VideoHostTiming t;
  std::vector<double> dec, pre;
  using Clock = std::chrono::steady_clock;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const auto t0 = Clock::now();
    const vision::DecodedVideo v = vision::decode_video(mp4, lim, vision::frame_chooser(c, {}));
    const auto t1 = Clock::now();
    const vision::ProcessedVideo p = vision::preprocess_video(v, c);
    const auto t2 = Clock::now();
    dec.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    pre.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    t.total_frames = v.info.total_frames;
    t.kept_frames = static_cast<int64_t>(v.indices.size());
    t.pairs = static_cast<int64_t>(p.patches.size());
    t.height = p.patches.front().resized.height;
    t.width = p.patches.front().resized.width;
    t.tokens = 0;
    for (const auto& im : p.patches) t.tokens += im.num_tokens(c.image.merge_size);
  }
  std::sort(dec.begin(), dec.end());
  std::sort(pre.begin(), pre.end());
  t.decode_ms = dec[dec.size() / 2];
  t.preprocess_ms = pre[pre.size() / 2];
  return t;
}

}  // namespace ds::bench
