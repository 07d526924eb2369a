// The host-side position inputs of the vision encoder and the language model, in HF's
// arithmetic (docs/vision.md):
//  * vision_positions: per patch row of a batch of images (HF's patch order, block-major over
//    merge x merge blocks), the bilinear taps into the learned position table
//    (align_corners, weights in f32) and the axial 2-D rotary cos / sin tables (f32
//    frequencies, [row angles | column angles] over half the head), plus one attention
//    segment per image frame: what kernels::VisionBatchDesc takes.
//  * mrope_positions: the (t, h, w) positions of a prompt's tokens (get_rope_index) and the
//    delta that carries into decode.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/qwen35/vision_config.h"

namespace ds::qwen35 {

// An image's patch grid: t frames of h x w patches (h and w multiples of the merge size).
struct VisionGrid {
  int64_t t = 1, h = 0, w = 0;
  int64_t patches() const { return t * h * w; }
};

struct VisionPositions {
  std::vector<int64_t> segments;  // rows of each attention segment (h * w, t per image)
  std::vector<int32_t> pos_index;  // rows * 4
  std::vector<float> pos_weight;   // rows * 4
  std::vector<float> rope_cos, rope_sin;  // rows * head_dim / 2
};

VisionPositions vision_positions(std::span<const VisionGrid> grids, const VisionConfig& config);

// An image's run of pad tokens in a prompt and its merged grid (t, h / m, w / m).
struct PromptImageSpan {
  int64_t offset = 0;  // first pad token
  int64_t t = 1, h = 0, w = 0;  // merged grid; t * h * w pad tokens
  int64_t tokens() const { return t * h * w; }
};

struct MropeLayout {
  // (t, h, w) of tokens [0, end), 3 each; end is the end of the last image (0: none).
  std::vector<int64_t> positions;
  int64_t end = 0;
  // Every token at or after `end` sits at its index + delta on all three axes.
  int64_t delta = 0;
};

// images: in prompt order, not overlapping, inside [0, prompt_len).
MropeLayout mrope_positions(int64_t prompt_len, std::span<const PromptImageSpan> images);

}  // namespace ds::qwen35
