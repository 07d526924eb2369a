// VisionEncoder: Qwen3.5's vision tower on a Backend, written once against the op interface
// (kernels/backend.h) as Model is: images in (their processed patches), one row per image
// token out, in the language model's hidden size (docs/vision.md "The encoder").
//
//   patches [N, 3 P P] -> GEMM (temporal-summed Conv3d; a video's [N, 3 T P P], the whole one) + bias -> + resampled position table
//   -> depth x [x += proj(attn(LN1 x)) ; x += fc2(gelu(fc1(LN2 x)))]   (attention within each
//   image, 2-D rotary on q and k) -> merger: LN, 2 x 2 patches as one row, fc1, exact GELU, fc2.
//
// A step encodes a batch of images at once (their rows back to back, attention segmented per
// image), so small images share the GEMMs. The encoder owns its weights, the image
// processor's settings (preprocessor_config.json: the patch layout must agree with the tower)
// and a workspace that grows to the largest step. Not thread-safe: the engine thread drives it.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "model/qwen35/checkpoint.h"
#include "model/qwen35/vision_config.h"
#include "model/qwen35/vision_positions.h"
#include "model/qwen35/vision_weights.h"
#include "model/vision/processor.h"

namespace ds::qwen35 {

class VisionEncoder {
 public:
  // Loads model.visual.* of ckpt and dir/preprocessor_config.json. Throws std::runtime_error
  // naming the file and tensor or key at fault (also when the processor's patch, merge or
  // temporal size disagrees with the tower's).
  static std::unique_ptr<VisionEncoder> load(kernels::Backend& backend, const std::filesystem::path& dir,
                                             const Checkpoint& ckpt, const VisionConfig& config);
  VisionEncoder(kernels::Backend& backend, VisionConfig config, vision::ImageProcessorConfig processor,
                VisionWeights weights);
  ~VisionEncoder();
  VisionEncoder(const VisionEncoder&) = delete;
  VisionEncoder& operator=(const VisionEncoder&) = delete;

  const VisionConfig& config() const { return config_; }
  const vision::ImageProcessorConfig& processor() const { return processor_; }
  const VisionWeights& weights() const { return weights_; }
  kernels::Backend& backend() const { return *backend_; }

  // The embeddings of `images`: [sum of their tokens, out_hidden] f32 in backend memory (a
  // fresh tensor the caller keeps), image i's rows after image i-1's.
  kernels::Tensor encode(std::span<const vision::ProcessedImage* const> images);
  // A step with any video temporal patch (ProcessedImage::is_video) writes all its rows with
  // their T frames and uses the unsummed patch kernel; otherwise rows of one copy.
  // The same from patch rows already made for these grids (tests feed HF's pixel values
  // through it): temporal 1, [N, 3 P P] (write_patches with temporal 1, the summed kernel), or
  // temporal_patch_size, [N, 3 T P P] (HF's pixel_values rows, the checkpoint's kernel).
  kernels::Tensor encode_patches(std::span<const float> patches, std::span<const VisionGrid> grids,
                                 int64_t temporal = 1);

  // Sizes the workspace for steps of up to max_patches patch rows now (what serve does at
  // start-up, before the cache takes the rest of the memory).
  void reserve(int64_t max_patches) { workspace(max_patches); }
  // Debug hook: the patch rows before the merger ([N, C] f32), once per encode.
  void set_hidden_observer(std::function<void(const kernels::Tensor&)> f) { observer_ = std::move(f); }
  // FLOPs of encoding these grids (benchmarks).
  double flops(std::span<const VisionGrid> grids) const;

 private:
  struct Workspace;
  Workspace& workspace(int64_t rows);

  kernels::Backend* backend_;
  VisionConfig config_;
  vision::ImageProcessorConfig processor_;
  VisionWeights weights_;
  std::unique_ptr<Workspace> ws_;
  std::function<void(const kernels::Tensor&)> observer_;
};

}  // namespace ds::qwen35
