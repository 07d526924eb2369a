// decode_video: the bytes of a video (MP4 / H.264, WebM / VP9 and the other containers and
// codecs listed in video_decode.cpp that Debian's FFmpeg reads) to the RGB frames a sampler
// picks, read from memory through a custom AVIOContext (no temporary file, no protocol: the
// demuxer can open nothing but these bytes).
//
// Two passes over the bytes. The first only demuxes: the video stream's size, frame rate and
// frame count (one packet a frame), all checked against the limits before any decoding. The
// chooser (the processor's frame sampling, video_processor.h) then names the frame indices it
// wants, and the second pass decodes every frame (inter prediction needs them all) and
// converts only the chosen ones to RGB24 with libswscale (bilinear, what PyAV's to_ndarray
// and the ffmpeg CLI with -sws_flags bilinear give).
//
// The input is untrusted: bytes, duration, frame count, pixels per frame and wall time are
// bounded; the decoder is told to fail on the errors it detects (AV_EF_EXPLODE) and a packet
// or frame marked corrupt, a stream that ends before its frames, a frame size that changes
// mid-stream, or a codec outside the list is refused. Every refusal is an ImageError (the
// server's 400) saying what is wrong.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/vision/image.h"

namespace ds::vision {

struct VideoLimits {
  int64_t max_bytes = int64_t{64} << 20;  // encoded size
  double max_seconds = 600;               // frames / fps
  int64_t max_frames = 36000;             // frames in the stream (not only the sampled ones)
  int64_t max_pixels = int64_t{3840} * 2160;  // width * height of a frame
  int64_t max_side = 4096;
  std::chrono::milliseconds max_time{30000};  // both passes
  int threads = 4;  // decoder threads
};

// What the first pass finds.
struct VideoStreamInfo {
  int64_t width = 0, height = 0;
  int64_t total_frames = 0;  // packets of the video stream
  double fps = 0;            // average frame rate; 0 when the container does not say
};

struct DecodedVideo {
  VideoStreamInfo info;
  std::vector<int64_t> indices;  // the chosen frames, as the chooser returned them
  std::vector<RgbImage> frames;  // one per index (as the transform left it, if one was given)
};

// Returns the frame indices to keep (each in [0, total_frames), non-decreasing); may throw
// ImageError.
using FrameChooser = std::function<std::vector<int64_t>(const VideoStreamInfo&)>;
// Applied to each kept frame as soon as it is decoded (kept: how many frames are kept in all),
// so that only its result is held: the video processor's resize keeps a request's memory at
// the processor's pixel budget instead of (kept frames x the source's size).
using FrameTransform = std::function<RgbImage(RgbImage&& frame, const VideoStreamInfo& info, int64_t kept)>;

// Throws ImageError also where FFmpeg's libraries are not installed (video_decoder_status()).
DecodedVideo decode_video(std::span<const uint8_t> data, const VideoLimits& limits, const FrameChooser& choose,
                          const FrameTransform& transform = {});

// Frames decoded elsewhere, as decode_video returns them: `raw` holds info.total_frames RGB24
// frames of info.width x info.height back to back (what `ffmpeg -f rawvideo -pix_fmt rgb24`
// writes). Needs no FFmpeg: the fixtures' checks (refcheck, the engine's video tests) read the
// fixture clip's committed CLI decoding this way on a machine without FFmpeg; the decoder
// itself is checked against those frames in tests/vision/test_video.cpp. Throws ImageError
// when the size disagrees with info.
DecodedVideo decode_rgb24(std::span<const uint8_t> raw, const VideoStreamInfo& info, const FrameChooser& choose,
                          const FrameTransform& transform = {});

// Empty where decode_video can run, else why not (FFmpeg's libraries are opened at run time,
// ffmpeg_library.h): serve turns video off with this reason at start-up.
std::string video_decoder_status();

}  // namespace ds::vision
