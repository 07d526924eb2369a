// VisionWeights: the vision tower (model.visual.*) uploaded to a backend and checked against
// VisionConfig, as load_weights does for the text tower: a missing, mis-shaped or left-over
// tensor fails naming the file and tensor. Weights keep the checkpoint's [out, in] layout;
// biases, norms and the position table are vectors / rows the ops read in f32.
//
// The patch embedding (a Conv3d [C, 3, T, P, P] with stride = kernel, so a GEMM) is stored
// summed over its T temporal slices: a still image repeats itself along time (the processor
// copies it T times), so x · W = x_0 · (W_0 + ... + W_{T-1}). Our patch rows are one copy
// ([N, 3 P P], vision::write_patches with temporal 1): T times less input and GEMM work.
// A video's temporal patch holds T different frames, so the unsummed kernel is kept too
// (patch_w_video, [C, 3 T P P] in HF's row order channel, time, y, x).
//
// An FP8 release keeps its tower in bf16; a tower stored as F8_E4M3 with block scales
// (`<name>_scale_inv`, F32 or BF16) is dequantised at load like the text weights (fp8.h).
#pragma once

#include <vector>

#include "kernels/backend.h"
#include "model/qwen35/checkpoint.h"
#include "model/qwen35/vision_config.h"

namespace ds::qwen35 {

struct VisionBlockWeights {
  kernels::Tensor norm1_w, norm1_b;  // [C]
  kernels::Tensor qkv_w, qkv_b;      // [3C, C] (q | k | v, head-major), [3C]
  kernels::Tensor proj_w, proj_b;    // [C, C], [C]
  kernels::Tensor norm2_w, norm2_b;  // [C]
  kernels::Tensor fc1_w, fc1_b;      // [I, C], [I]
  kernels::Tensor fc2_w, fc2_b;      // [C, I], [C]
};

struct VisionWeights {
  kernels::Tensor patch_w;  // [C, 3 P P], summed over time (see above)
  kernels::Tensor patch_w_video;  // [C, 3 T P P], as the checkpoint has it
  kernels::Tensor patch_b;  // [C]
  kernels::Tensor pos_embed;  // [num_position_embeddings, C]
  std::vector<VisionBlockWeights> blocks;
  kernels::Tensor merger_norm_w, merger_norm_b;  // [C]
  kernels::Tensor merger_fc1_w, merger_fc1_b;    // [4C, 4C], [4C]
  kernels::Tensor merger_fc2_w, merger_fc2_b;    // [out_hidden, 4C], [out_hidden]
  int64_t bytes = 0;  // device bytes of all of the above
};

VisionWeights load_vision_weights(kernels::Backend& backend, const Checkpoint& ckpt, const VisionConfig& config);

}  // namespace ds::qwen35
