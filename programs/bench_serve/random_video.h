// Synthetic clips for --video-seconds / --video-size: an MP4 of H.264 (libx264 through Debian's
// libavcodec; MPEG-4 Part 2 where libx264 is missing) of coloured 32x32 tiles that scroll one
// pixel a frame, so every frame differs (inter prediction has work, the decoder decodes real
// motion) while the file stays small. Different for every seed, so distinct clips never share
// an encoder-cache entry on the server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::bench {

// width x height (even sides), seconds at fps.
std::vector<uint8_t> random_mp4(int width, int height, double seconds, double fps, uint64_t seed);

// "data:video/mp4;base64,..." of `mp4`.
std::string mp4_data_url(const std::vector<uint8_t>& mp4);

}  // namespace ds::bench
