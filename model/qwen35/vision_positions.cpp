#include "model/qwen35/vision_positions.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ds::qwen35 {

namespace {

// One axis of the position table's bilinear resampling (HF's align_corners taps): the two
// taps and weights of target index i on an axis of n over a table side of s, in f32.
void axis_taps(int64_t i, int64_t n, int64_t s, int64_t tap[2], float wt[2]) {
  const float src = static_cast<float>(static_cast<float>(i) * static_cast<float>(s - 1)) /
                    static_cast<float>(std::max<int64_t>(n - 1, 1));
  const float fl = std::floor(src);
  for (int k = 0; k < 2; ++k) {
    tap[k] = std::clamp<int64_t>(static_cast<int64_t>(fl) + k, 0, s - 1);
    wt[k] = std::max(1.0f - std::abs(src - fl - static_cast<float>(k)), 0.0f);
  }
}

}  // namespace

VisionPositions vision_positions(std::span<const VisionGrid> grids, const VisionConfig& c) {
  VisionPositions out;
  const int64_t m = c.spatial_merge_size, side = c.pos_grid_side(), d = c.head_dim(), quarter = d / 4;
  // Rotary frequencies as HF computes them: 1 / theta^(f32(2j) / (d / 2)) in f32.
  std::vector<float> inv(static_cast<size_t>(quarter));
  for (int64_t j = 0; j < quarter; ++j) {
    const float e = static_cast<float>(2 * j) / static_cast<float>(d / 2);
    inv[static_cast<size_t>(j)] =
        1.0f / static_cast<float>(std::pow(static_cast<double>(static_cast<float>(c.rope_theta)), static_cast<double>(e)));
  }
  for (const VisionGrid& g : grids) {
    if (g.t < 1 || g.h < m || g.w < m || g.h % m || g.w % m)
      throw std::invalid_argument("vision_positions: a grid of " + std::to_string(g.h) + " x " + std::to_string(g.w) +
                                  " patches is not made of " + std::to_string(m) + " x " + std::to_string(m) + " blocks");
    for (int64_t f = 0; f < g.t; ++f) {
      out.segments.push_back(g.h * g.w);
      for (int64_t bh = 0; bh < g.h / m; ++bh)
        for (int64_t bw = 0; bw < g.w / m; ++bw)
          for (int64_t ih = 0; ih < m; ++ih)
            for (int64_t iw = 0; iw < m; ++iw) {
              const int64_t row = bh * m + ih, col = bw * m + iw;
              int64_t ht[2], wt_[2];
              float hw[2], ww[2];
              axis_taps(row, g.h, side, ht, hw);
              axis_taps(col, g.w, side, wt_, ww);
              for (int a = 0; a < 2; ++a)
                for (int b = 0; b < 2; ++b) {
                  out.pos_index.push_back(static_cast<int32_t>(ht[a] * side + wt_[b]));
                  out.pos_weight.push_back(hw[a] * ww[b]);
                }
              for (int64_t axis = 0; axis < 2; ++axis)
                for (int64_t j = 0; j < quarter; ++j) {
                  const float angle = static_cast<float>(axis == 0 ? row : col) * inv[static_cast<size_t>(j)];
                  out.rope_cos.push_back(static_cast<float>(std::cos(static_cast<double>(angle))));
                  out.rope_sin.push_back(static_cast<float>(std::sin(static_cast<double>(angle))));
                }
            }
    }
  }
  return out;
}

MropeLayout mrope_positions(int64_t prompt_len, std::span<const PromptImageSpan> images) {
  MropeLayout out;
  int64_t next = 0;     // the next token index to place
  int64_t counter = 0;  // the position the next text token takes
  int64_t max_pos = -1;
  auto text_until = [&](int64_t end) {
    for (; next < end; ++next, ++counter) out.positions.insert(out.positions.end(), 3, counter);
    max_pos = std::max(max_pos, counter - 1);
  };
  for (const PromptImageSpan& im : images) {
    if (im.offset < next || im.offset + im.tokens() > prompt_len || im.t < 1 || im.h < 1 || im.w < 1)
      throw std::invalid_argument("mrope_positions: image spans out of order or outside the prompt");
    text_until(im.offset);
    const int64_t start = counter;
    for (int64_t t = 0; t < im.t; ++t)
      for (int64_t i = 0; i < im.h; ++i)
        for (int64_t j = 0; j < im.w; ++j) {
          out.positions.insert(out.positions.end(), {start + t, start + i, start + j});
          max_pos = std::max({max_pos, start + t, start + i, start + j});
        }
    next = im.offset + im.tokens();
    counter = start + std::max(im.h, im.w);
  }
  out.end = next;
  // Text after the last image: index + delta, with delta what HF carries into decode
  // (the largest position of the prompt + 1 - its length).
  const int64_t tail = prompt_len - next;
  if (tail > 0) max_pos = std::max(max_pos, counter + tail - 1);
  out.delta = images.empty() ? 0 : max_pos + 1 - prompt_len;
  return out;
}

}  // namespace ds::qwen35
