#include "model/qwen35/multimodal.h"

#include <algorithm>
#include <stdexcept>

namespace ds::qwen35 {

MultimodalPrompt MultimodalPrompt::make(int64_t prompt_len, std::vector<PromptImageSpan> images) {
  MultimodalPrompt p;
  p.mrope = mrope_positions(prompt_len, images);
  p.images = std::move(images);
  return p;
}

std::span<const int64_t> MultimodalPrompt::chunk_positions(int64_t start, int64_t n) const {
  const int64_t end = std::min(start + n, mrope.end);
  if (start >= end) return {};
  return std::span<const int64_t>(mrope.positions).subspan(static_cast<size_t>(3 * start), static_cast<size_t>(3 * (end - start)));
}

void MultimodalPrompt::chunk_embeddings(int64_t start, int64_t n, std::span<const kernels::Tensor> embeddings,
                                        std::vector<EmbeddingRows>& out) const {
  if (embeddings.size() != images.size())
    throw std::invalid_argument("MultimodalPrompt: " + std::to_string(embeddings.size()) + " embeddings for " +
                                std::to_string(images.size()) + " images");
  for (size_t i = 0; i < images.size(); ++i) {
    const PromptImageSpan& im = images[i];
    const int64_t a = std::max(start, im.offset), b = std::min(start + n, im.offset + im.tokens());
    if (a >= b) continue;
    const kernels::Tensor& e = embeddings[i];
    if (e.empty() || e.dim(0) != im.tokens())
      throw std::invalid_argument("MultimodalPrompt: image " + std::to_string(i) + "'s embeddings do not hold its " +
                                  std::to_string(im.tokens()) + " tokens");
    out.push_back({a - start, e.rows(a - im.offset, b - a)});
  }
}

std::vector<size_t> MultimodalPrompt::images_in(int64_t start, int64_t n) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < images.size(); ++i)
    if (images[i].offset < start + n && images[i].offset + images[i].tokens() > start) out.push_back(i);
  return out;
}

}  // namespace ds::qwen35
