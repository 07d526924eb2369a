// MultimodalPrompt: where a prompt's images sit and how the model reads them chunk by chunk.
// Built once per request from the image spans (the pad runs the template expanded) and used
// for every chunk a prefill is cut into: the chunk's M-RoPE positions (a slice of the
// prompt's, docs/vision.md) and the rows that take an image's encoder output.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/tensor.h"
#include "model/qwen35/forward_batch.h"
#include "model/qwen35/vision_positions.h"

namespace ds::qwen35 {

struct MultimodalPrompt {
  std::vector<PromptImageSpan> images;  // prompt order
  MropeLayout mrope;

  // images in prompt order, not overlapping, inside [0, prompt_len).
  static MultimodalPrompt make(int64_t prompt_len, std::vector<PromptImageSpan> images);

  // The M-RoPE positions of tokens [start, start + n) that the prompt's layout names (3 per
  // token, possibly fewer tokens than n: the rest take index + mrope.delta).
  std::span<const int64_t> chunk_positions(int64_t start, int64_t n) const;
  // The rows of [start, start + n) that are image pads, as views of their image's embeddings
  // (embeddings[i]: image i's encoder output, [tokens, hidden]); rows relative to start.
  void chunk_embeddings(int64_t start, int64_t n, std::span<const kernels::Tensor> embeddings,
                        std::vector<EmbeddingRows>& out) const;
  // Images with at least one pad token in [start, start + n).
  std::vector<size_t> images_in(int64_t start, int64_t n) const;
};

}  // namespace ds::qwen35
