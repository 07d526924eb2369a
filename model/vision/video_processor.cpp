#include "model/vision/video_processor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "model/vision/resize.h"

namespace ds::vision {

namespace {

int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

// HF's Qwen3VLVideoProcessor class defaults (what a checkpoint's file does not override).
ImageProcessorConfig video_defaults() {
  ImageProcessorConfig c;
  c.min_pixels = 128 * 32 * 32;
  c.max_pixels = 768 * 32 * 32;
  c.patch_size = 16;
  c.temporal_patch_size = 2;
  c.merge_size = 2;
  c.mean = {0.5f, 0.5f, 0.5f};
  c.std = {0.5f, 0.5f, 0.5f};
  return c;
}

}  // namespace

VideoProcessorConfig VideoProcessorConfig::load(const std::filesystem::path& dir) {
  VideoProcessorConfig c;
  const auto path = dir / "video_preprocessor_config.json";
  if (!std::filesystem::exists(path)) {
    const ImageProcessorConfig image = ImageProcessorConfig::load(dir);
    c.image = video_defaults();
    c.image.patch_size = image.patch_size;
    c.image.temporal_patch_size = image.temporal_patch_size;
    c.image.merge_size = image.merge_size;
    return c;
  }
  c.image = ImageProcessorConfig::load_file(path, video_defaults());
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);  // load_file parsed it already
  auto fail = [&](const std::string& key, const std::string& why) {
    throw std::runtime_error(path.string() + ": " + key + " " + why);
  };
  if (j.contains("fps") && !j["fps"].is_null()) {
    if (!j["fps"].is_number() || !(j["fps"].get<double>() > 0) || j["fps"].get<double>() > 1000) fail("fps", "must be in (0, 1000]");
    c.fps = j["fps"].get<double>();
  }
  for (auto [key, dst] : {std::pair{"min_frames", &c.min_frames}, {"max_frames", &c.max_frames}}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1 || j[key].get<int64_t>() > 100000)
      fail(key, "must be an integer from 1 to 100000");
    *dst = j[key].get<int64_t>();
  }
  if (j.contains("num_frames") && !j["num_frames"].is_null()) fail("num_frames", "(a fixed frame count) is not supported");
  if (j.contains("do_sample_frames") && j["do_sample_frames"] != true) fail("do_sample_frames", "other than true is not supported");
  return c;
}

std::vector<int64_t> sample_frame_indices(int64_t total, double video_fps, double fps, int64_t min_frames,
                                          int64_t max_frames) {
  if (total < 1) throw ImageError("the video has no frames");
  if (!(video_fps > 0)) video_fps = kDefaultVideoFps;
  // int(total / video_fps * fps): Python truncates toward zero.
  const double want = std::trunc(static_cast<double>(total) / video_fps * fps);
  int64_t n = want > 1e12 ? int64_t{1} << 40 : static_cast<int64_t>(want);
  n = std::min({std::max(n, min_frames), max_frames, total});
  std::vector<int64_t> out;
  if (n <= 0) return out;
  if (n == 1) return {0};
  // numpy.linspace(0, total - 1, n): i * step in float64, the last exactly total - 1; then
  // .round() (half to even).
  const double step = static_cast<double>(total - 1) / static_cast<double>(n - 1);
  for (int64_t i = 0; i + 1 < n; ++i) out.push_back(round_half_even(static_cast<double>(i) * step));
  out.push_back(total - 1);
  return out;
}

ResizeTarget video_smart_resize(int64_t frames, int64_t height, int64_t width, int64_t temporal_factor, int64_t factor,
                                int64_t min_pixels, int64_t max_pixels) {
  if (frames < temporal_factor)
    throw ImageError("the video has " + std::to_string(frames) + " frame(s) to use; at least " +
                     std::to_string(temporal_factor) + " are needed");
  if (height < factor || width < factor)
    throw ImageError("video frames of " + std::to_string(width) + "x" + std::to_string(height) +
                     " pixels are too small: each side must be at least " + std::to_string(factor));
  if (static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width)) > 200)
    throw ImageError("the video's aspect ratio (" + std::to_string(width) + "x" + std::to_string(height) +
                     ") is above 200");
  const double t = static_cast<double>(frames), h = static_cast<double>(height), w = static_cast<double>(width),
               f = static_cast<double>(factor);
  int64_t hb = round_half_even(h / f) * factor, wb = round_half_even(w / f) * factor;
  const int64_t tb = round_half_even(t / static_cast<double>(temporal_factor)) * temporal_factor;
  if (static_cast<double>(tb) * static_cast<double>(hb) * static_cast<double>(wb) > static_cast<double>(max_pixels)) {
    const double beta = std::sqrt((t * h * w) / static_cast<double>(max_pixels));
    hb = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    wb = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (tb * hb * wb < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (t * h * w));
    hb = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    wb = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  if (hb <= 0 || wb <= 0 || hb * wb > (int64_t{1} << 31))
    throw ImageError("the video cannot be resized within the pixel bounds");
  return {hb, wb};
}

std::vector<double> video_timestamps(const std::vector<int64_t>& indices, double video_fps, int64_t merge) {
  if (!(video_fps > 0)) video_fps = kDefaultVideoFps;
  std::vector<int64_t> idx = indices;
  while (!idx.empty() && idx.size() % static_cast<size_t>(merge)) idx.push_back(idx.back());
  std::vector<double> out;
  for (size_t i = 0; i < idx.size(); i += static_cast<size_t>(merge)) {
    const double a = static_cast<double>(idx[i]) / video_fps, b = static_cast<double>(idx[i + static_cast<size_t>(merge) - 1]) / video_fps;
    out.push_back((a + b) / 2);
  }
  return out;
}

std::string timestamp_text(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "<%.1f seconds>", seconds);
  return buf;
}

FrameChooser frame_chooser(const VideoProcessorConfig& c, const VideoSampling& s) {
  const double fps = s.fps.value_or(c.fps);
  const int64_t max_frames = s.max_frames.value_or(c.max_frames), min_frames = c.min_frames;
  return [=](const VideoStreamInfo& info) {
    return sample_frame_indices(info.total_frames, info.fps, fps, min_frames, max_frames);
  };
}

namespace {

ResizeTarget clip_target(const VideoStreamInfo& info, int64_t kept, const ImageProcessorConfig& ic,
                         const PixelBounds& bounds) {
  const int64_t lo = bounds.min_pixels.value_or(ic.min_pixels), hi = bounds.max_pixels.value_or(ic.max_pixels);
  if (lo <= 0 || hi <= 0 || lo > hi) throw ImageError("min_pixels and max_pixels must be positive with min_pixels <= max_pixels");
  return video_smart_resize(kept, info.height, info.width, ic.temporal_patch_size, ic.factor(), lo, hi);
}

}  // namespace

FrameTransform frame_resizer(const VideoProcessorConfig& c, const PixelBounds& bounds) {
  return [ic = c.image, bounds](RgbImage&& f, const VideoStreamInfo& info, int64_t kept) {
    const ResizeTarget t = clip_target(info, kept, ic, bounds);
    return t.height == f.height && t.width == f.width ? std::move(f) : resize_bicubic(f, t.width, t.height);
  };
}

ProcessedVideo preprocess_video(DecodedVideo v, const VideoProcessorConfig& c, const PixelBounds& bounds) {
  const ImageProcessorConfig& ic = c.image;
  if (v.frames.size() != v.indices.size()) throw std::invalid_argument("preprocess_video: frames and indices differ");
  const auto n = static_cast<int64_t>(v.frames.size());
  const ResizeTarget t = clip_target(v.info, n, ic, bounds);
  ProcessedVideo out;
  out.info = v.info;
  out.indices = v.indices;
  std::vector<RgbImage> resized;
  resized.reserve(v.frames.size());
  for (RgbImage& f : v.frames) {
    if (f.width == t.width && f.height == t.height) {
      resized.push_back(std::move(f));  // frame_resizer's output (or a source already that size)
    } else if (f.width == v.info.width && f.height == v.info.height) {
      resized.push_back(resize_bicubic(f, t.width, t.height));
    } else {
      throw std::invalid_argument("preprocess_video: a frame is neither the source's size nor the target's");
    }
  }
  const auto T = static_cast<size_t>(ic.temporal_patch_size);
  while (resized.size() % T) {  // HF repeats the last frame
    RgbImage last = resized.back();
    resized.push_back(std::move(last));
  }
  for (size_t i = 0; i < resized.size(); i += T) {
    ProcessedImage p;
    p.resized = std::move(resized[i]);
    for (size_t k = 1; k < T; ++k) p.later.push_back(std::move(resized[i + k]));
    p.grid_t = 1;
    p.grid_h = t.height / ic.patch_size;
    p.grid_w = t.width / ic.patch_size;
    out.patches.push_back(std::move(p));
  }
  out.timestamps = video_timestamps(v.indices, v.info.fps, ic.merge_size);
  if (out.timestamps.size() != out.patches.size())
    throw std::logic_error("preprocess_video: the temporal patch (" + std::to_string(T) + ") and the merge size (" +
                           std::to_string(ic.merge_size) + ") differ; HF's timestamps assume they are equal");
  return out;
}

}  // namespace ds::vision
