#include "model/vision/processor.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "model/vision/resize.h"

namespace ds::vision {

namespace {

// Python's round(): halves to even.
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

ImageProcessorConfig ImageProcessorConfig::load(const std::filesystem::path& dir) {
  return load_file(dir / "preprocessor_config.json", ImageProcessorConfig{});
}

ImageProcessorConfig ImageProcessorConfig::load_file(const std::filesystem::path& path, ImageProcessorConfig c) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
  auto fail = [&](const std::string& key, const std::string& why) {
    throw std::runtime_error(path.string() + ": " + key + " " + why);
  };
  auto integer = [&](const nlohmann::json& obj, const char* key, int64_t& dst, int64_t lo, int64_t hi) {
    if (!obj.contains(key) || obj[key].is_null()) return;
    if (!obj[key].is_number_integer()) fail(key, "must be an integer");
    dst = obj[key].get<int64_t>();
    if (dst < lo || dst > hi) fail(key, "= " + std::to_string(dst) + " is outside [" + std::to_string(lo) + ", " +
                                            std::to_string(hi) + "]");
  };
  constexpr int64_t kMaxPixels = int64_t{1} << 31;
  if (j.contains("size") && j["size"].is_object()) {
    integer(j["size"], "shortest_edge", c.min_pixels, 1, kMaxPixels);
    integer(j["size"], "longest_edge", c.max_pixels, 1, kMaxPixels);
  }
  integer(j, "min_pixels", c.min_pixels, 1, kMaxPixels);
  integer(j, "max_pixels", c.max_pixels, 1, kMaxPixels);
  integer(j, "patch_size", c.patch_size, 1, 64);
  integer(j, "temporal_patch_size", c.temporal_patch_size, 1, 8);
  integer(j, "merge_size", c.merge_size, 1, 8);
  if (c.min_pixels > c.max_pixels) fail("size", "has shortest_edge (min_pixels) above longest_edge (max_pixels)");
  for (const char* key : {"image_mean", "image_std"}) {
    if (!j.contains(key)) continue;
    const auto& v = j[key];
    if (!v.is_array() || v.size() != 3) fail(key, "must be 3 numbers");
    for (int i = 0; i < 3; ++i) {
      if (!v[static_cast<size_t>(i)].is_number()) fail(key, "must be 3 numbers");
      const double x = v[static_cast<size_t>(i)].get<double>();
      if (key[6] == 's' && !(x > 0)) fail(key, "must be positive");
      (key[6] == 'm' ? c.mean : c.std)[static_cast<size_t>(i)] = static_cast<float>(x);
    }
  }
  if (j.contains("rescale_factor")) {
    if (!j["rescale_factor"].is_number() || !(j["rescale_factor"].get<double>() > 0)) fail("rescale_factor", "must be positive");
    c.rescale_factor = j["rescale_factor"].get<double>();
  }
  for (const char* key : {"do_resize", "do_rescale", "do_normalize", "do_convert_rgb"})
    if (j.contains(key) && j[key] != true) fail(key, "other than true is not supported");
  if (j.contains("resample") && j["resample"] != 3) fail("resample", "other than 3 (bicubic) is not supported");
  return c;
}

ResizeTarget smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels, int64_t max_pixels) {
  if (height <= 0 || width <= 0) throw ImageError("the image has no pixels");
  const double h = static_cast<double>(height), w = static_cast<double>(width), f = static_cast<double>(factor);
  if (static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width)) > 200)
    throw ImageError("the image's aspect ratio (" + std::to_string(width) + "x" + std::to_string(height) +
                     ") is above 200");
  int64_t hb = round_half_even(h / f) * factor, wb = round_half_even(w / f) * factor;
  if (hb * wb > max_pixels) {
    const double beta = std::sqrt((h * w) / static_cast<double>(max_pixels));
    hb = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    wb = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (hb * wb < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    hb = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    wb = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  if (hb <= 0 || wb <= 0 || hb * wb > (int64_t{1} << 31))
    throw ImageError("the image cannot be resized within the pixel bounds");
  return {hb, wb};
}

ProcessedImage preprocess(const RgbImage& image, const ImageProcessorConfig& c, const PixelBounds& bounds) {
  const int64_t lo = bounds.min_pixels.value_or(c.min_pixels), hi = bounds.max_pixels.value_or(c.max_pixels);
  if (lo <= 0 || hi <= 0 || lo > hi)
    throw ImageError("min_pixels and max_pixels must be positive with min_pixels <= max_pixels");
  const ResizeTarget t = smart_resize(image.height, image.width, c.factor(), lo, hi);
  ProcessedImage p;
  p.resized = (t.height == image.height && t.width == image.width) ? image : resize_bicubic(image, t.width, t.height);
  p.grid_h = t.height / c.patch_size;
  p.grid_w = t.width / c.patch_size;
  return p;
}

void write_patches(const ProcessedImage& img, const ImageProcessorConfig& c, int64_t temporal, std::span<float> out) {
  const int64_t P = c.patch_size, m = c.merge_size;
  const int64_t row_len = 3 * temporal * P * P;
  if (static_cast<int64_t>(out.size()) != img.num_patches() * row_len)
    throw std::invalid_argument("write_patches: output of " + std::to_string(out.size()) + " values for " +
                                std::to_string(img.num_patches()) + " patches of " + std::to_string(row_len));
  // HF fuses rescale and normalise: mean and std are scaled by 1 / rescale_factor in f32,
  // then (x - mean) / std in f32.
  const float inv = static_cast<float>(1.0 / c.rescale_factor);
  float mean[3], std_[3];
  for (int ch = 0; ch < 3; ++ch) {
    mean[ch] = c.mean[static_cast<size_t>(ch)] * inv;
    std_[ch] = c.std[static_cast<size_t>(ch)] * inv;
  }
  if (img.is_video() && (temporal != 1 + static_cast<int64_t>(img.later.size())))
    throw std::invalid_argument("write_patches: a temporal patch of " + std::to_string(1 + img.later.size()) +
                                " frames written with temporal " + std::to_string(temporal));
  for (const RgbImage& f : img.later)
    if (f.width != img.resized.width || f.height != img.resized.height)
      throw std::invalid_argument("write_patches: a temporal patch's frames differ in size");
  float* dst = out.data();
  for (int64_t t = 0; t < img.grid_t; ++t)
    for (int64_t bh = 0; bh < img.grid_h / m; ++bh)
      for (int64_t bw = 0; bw < img.grid_w / m; ++bw)
        for (int64_t ih = 0; ih < m; ++ih)
          for (int64_t iw = 0; iw < m; ++iw) {
            const int64_t py = (bh * m + ih) * P, px = (bw * m + iw) * P;
            for (int64_t ch = 0; ch < 3; ++ch)
              for (int64_t tt = 0; tt < temporal; ++tt) {
                const RgbImage& im = tt == 0 || !img.is_video() ? img.resized : img.later[static_cast<size_t>(tt - 1)];
                for (int64_t y = 0; y < P; ++y) {
                  const uint8_t* src = im.row(py + y) + px * 3 + ch;
                  for (int64_t x = 0; x < P; ++x) *dst++ = (static_cast<float>(src[3 * x]) - mean[ch]) / std_[ch];
                }
              }
          }
}

}  // namespace ds::vision
