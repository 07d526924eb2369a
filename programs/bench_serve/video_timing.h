// The host side of one --video-seconds clip as a Qwen3.5 server prepares it (decode with the
// chosen frames, then the video processor; model/vision), under the released video processor
// settings (2 fps, 4 .. 768 frames, 4096 .. 768 x 32 x 32 x 32 pixels over all frames): what
// a request's clip costs the server's request thread before the engine sees it, measured on
// the benchmark's host (the studies run bench_serve beside serve).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::bench {

struct VideoHostTiming {
  double decode_ms = 0, preprocess_ms = 0;  // medians
  int64_t total_frames = 0, kept_frames = 0, pairs = 0, height = 0, width = 0, tokens = 0;
  std::string summary() const;
};

VideoHostTiming time_video_host(const std::vector<uint8_t>& mp4, int repeats = 3);

}  // namespace ds::bench
