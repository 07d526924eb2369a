// The video processor of Qwen3.5 / 3.6 (HF's Qwen3VLVideoProcessor and the timestamps its
// Qwen3VLProcessor writes; docs/vision.md "Video"): which frames are kept, the resize target
// of the whole clip, the per-frame resize and the temporal patches the encoder reads, and the
// time of each patch.
//
//  * sample_frame_indices: n = int(total / video_fps * fps) clamped to [min_frames,
//    max_frames] and to total; indices = numpy linspace(0, total - 1, n) rounded half to even.
//  * video_smart_resize: the image rule with the frame count in the pixel budget
//    (t' = round(n / 2) * 2 frames of h' x w' within [min_pixels, max_pixels]); fewer frames
//    than the temporal patch, or a side under patch x merge, is refused as HF refuses it.
//  * preprocess_video: each kept frame resized as an image is (resize.h), frames paired into
//    temporal patches (an odd count repeats the last frame), each pair a ProcessedImage with
//    grid_t = 1 and its second frame in `later`: the vision tower reads a video as one image
//    per temporal patch (attention never crosses frames), and the language model sees each as
//    its own <|vision_start|> ... <|vision_end|> run after its timestamp.
//  * timestamps: per temporal patch the mean of its first and last frame's time
//    (index / video_fps, the index list padded with its last entry to a multiple of 2), written
//    "<%.1f seconds>" before the patch's placeholder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "model/vision/processor.h"
#include "model/vision/video_decode.h"

namespace ds::vision {

struct VideoProcessorConfig {
  ImageProcessorConfig image;  // size (min / max pixels over all frames), patch, merge, mean, std
  double fps = 2;              // frames kept per second of video
  int64_t min_frames = 4;
  int64_t max_frames = 768;

  // video_preprocessor_config.json of a checkpoint directory, with HF's Qwen3VLVideoProcessor
  // defaults for keys it lacks (size 128 x 32 x 32 .. 768 x 32 x 32 pixels, mean / std 0.5);
  // a checkpoint without the file gets those defaults with preprocessor_config.json's patch
  // settings. Throws std::runtime_error naming the file and key for a value out of range.
  static VideoProcessorConfig load(const std::filesystem::path& dir);
};

// Per-request settings (vLLM's mm_processor_kwargs fps / max_frames), each replacing the
// config's when given.
struct VideoSampling {
  std::optional<double> fps;
  std::optional<int64_t> max_frames;
};

// The frame rate HF assumes when the container gives none.
inline constexpr double kDefaultVideoFps = 24;

std::vector<int64_t> sample_frame_indices(int64_t total_frames, double video_fps, double fps, int64_t min_frames,
                                          int64_t max_frames);

ResizeTarget video_smart_resize(int64_t frames, int64_t height, int64_t width, int64_t temporal_factor, int64_t factor,
                                int64_t min_pixels, int64_t max_pixels);

// Seconds of each temporal patch (merge: frames per patch, HF passes merge_size, equal to the
// temporal patch size in every Qwen3.5 checkpoint).
std::vector<double> video_timestamps(const std::vector<int64_t>& indices, double video_fps, int64_t merge);
// "<1.4 seconds>": Python's f"<{t:.1f} seconds>".
std::string timestamp_text(double seconds);

struct ProcessedVideo {
  std::vector<ProcessedImage> patches;  // one per temporal patch, grid_t 1, `later` filled
  std::vector<double> timestamps;       // one per temporal patch
  VideoStreamInfo info;
  std::vector<int64_t> indices;  // the frames kept
};

// The chooser decode_video takes for this config and request.
FrameChooser frame_chooser(const VideoProcessorConfig& config, const VideoSampling& sampling);
// The transform decode_video takes: each kept frame resized at once to the clip's
// video_smart_resize target (what preprocess_video would do later).
FrameTransform frame_resizer(const VideoProcessorConfig& config, const PixelBounds& bounds = {});

// video: decoded with frame_chooser(config, sampling), its frames at the source's size or
// already resized by frame_resizer(config, bounds). bounds: per-request min / max pixels.
ProcessedVideo preprocess_video(DecodedVideo video, const VideoProcessorConfig& config, const PixelBounds& bounds = {});

}  // namespace ds::vision
