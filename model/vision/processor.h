// The image processor of Qwen3.5 / 3.6 (HF's Qwen2VLImageProcessorFast, the torchvision
// backend; docs/vision.md "Preprocessing"): smart_resize to multiples of patch x merge within
// [min_pixels, max_pixels], the bicubic resize of resize.h, per-channel normalisation in f32,
// and the patch rows the encoder reads, in HF's order.
//
// A ProcessedImage keeps the resized 8-bit image and its grid (3 bytes a pixel, not the
// normalised floats: 1536 floats a patch would be 8x the memory while the request waits);
// write_patches makes the encoder's input from it when the image is encoded.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/vision/image.h"

namespace ds::vision {

struct ImageProcessorConfig {
  int64_t min_pixels = 56 * 56;         // size.shortest_edge
  int64_t max_pixels = 28 * 28 * 1280;  // size.longest_edge
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t merge_size = 2;
  std::array<float, 3> mean{0.48145466f, 0.4578275f, 0.40821073f};
  std::array<float, 3> std{0.26862954f, 0.26130258f, 0.27577711f};
  double rescale_factor = 1.0 / 255.0;

  // preprocessor_config.json of a checkpoint directory (HF's defaults for keys it lacks;
  // min_pixels / max_pixels keys override size as HF's constructor does). Throws
  // std::runtime_error naming the file and key for a value out of range or a resample other
  // than bicubic.
  static ImageProcessorConfig load(const std::filesystem::path& dir);
  // The same keys of any processor config file, over `defaults` (the video processor's file
  // shares them).
  static ImageProcessorConfig load_file(const std::filesystem::path& file, ImageProcessorConfig defaults);
  int64_t factor() const { return patch_size * merge_size; }
  // Values per patch row of a still image (channels x patch x patch; the temporal copies are
  // folded into the patch embedding, see write_patches).
  int64_t patch_values() const { return 3 * patch_size * patch_size; }
};

// Per-request bounds (vLLM's mm_processor_kwargs min_pixels / max_pixels): each replaces the
// config's when given.
struct PixelBounds {
  std::optional<int64_t> min_pixels, max_pixels;
};

struct ResizeTarget {
  int64_t height = 0, width = 0;
};
// HF's smart_resize; ImageError for an aspect ratio above 200 or a target beyond 2^31 pixels.
ResizeTarget smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels, int64_t max_pixels);

struct ProcessedImage {
  RgbImage resized;     // the smart_resize target
  // A video's temporal patch (video_processor.h): its frames after the first, the same size
  // as `resized`. Empty for a still image, which HF repeats along time.
  std::vector<RgbImage> later;
  bool is_video() const { return !later.empty(); }
  int64_t grid_t = 1;   // temporal patches (1 for a still image)
  int64_t grid_h = 0;   // patch rows and columns
  int64_t grid_w = 0;
  int64_t num_patches() const { return grid_t * grid_h * grid_w; }
  int64_t num_tokens(int64_t merge_size) const { return num_patches() / (merge_size * merge_size); }
};

ProcessedImage preprocess(const RgbImage& image, const ImageProcessorConfig& config, const PixelBounds& bounds = {});

// The encoder's input rows for `image`, normalised as HF's fused rescale + normalise computes
// (x - 255 mean) / (255 std) in f32, in HF's patch order (block-major over merge x merge
// blocks). temporal = 1: one copy per row ([num_patches, 3 p p], channel, y, x), what our
// encoder reads with its temporal-summed patch weight; temporal = temporal_patch_size: HF's
// pixel_values rows exactly ([num_patches, 3 T p p], channel, time, y, x), time step k from
// later[k - 1] when the image is a video's temporal patch (which needs temporal =
// temporal_patch_size: its frames differ).
void write_patches(const ProcessedImage& image, const ImageProcessorConfig& config, int64_t temporal,
                   std::span<float> out);

}  // namespace ds::vision
