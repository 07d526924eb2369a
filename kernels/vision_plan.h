// VisionPlan: the indices and tables of one vision-encoder step, checked once (the
// BatchPlan of the ViT; kernels/batch_plan.h is the language model's).
//
// A step encodes several images at once, their patch rows back to back ([rows, ...]).
// Attention never crosses an image: `segments` gives the rows of each attention segment (one
// per image, or per frame of a video). The learned position embedding is resampled per row
// as a weighted sum of `taps` rows of its table (bilinear: 4), and the 2-D rotary embedding
// is given as per-row cos / sin tables over half the head (the model computes both on the
// host, in HF's arithmetic, model/qwen35/vision_encoder.h). A device backend subclasses the
// plan and uploads it once (Backend::plan_vision).
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds::kernels {

struct VisionBatchDesc {
  std::span<const int64_t> segments;     // rows of each attention segment (>= 1 each)
  int64_t taps = 4;                      // position-table rows summed per patch row
  std::span<const int32_t> pos_index;    // rows * taps rows of the position table
  std::span<const float> pos_weight;     // rows * taps weights
  int64_t pos_table_rows = 0;            // pos_index must be below
  int64_t rope_half = 0;                 // head dim / 2
  std::span<const float> rope_cos;       // rows * rope_half
  std::span<const float> rope_sin;       // rows * rope_half
};

class VisionPlan {
 public:
  explicit VisionPlan(const VisionBatchDesc& d)
      : taps_(d.taps), pos_table_rows_(d.pos_table_rows), rope_half_(d.rope_half) {
    auto fail = [](const std::string& m) { throw std::invalid_argument("vision batch: " + m); };
    if (d.segments.empty()) fail("no segments");
    offsets_.push_back(0);
    for (int64_t n : d.segments) {
      if (n < 1) fail("an empty attention segment");
      offsets_.push_back(offsets_.back() + n);
      max_segment_ = std::max(max_segment_, n);
    }
    const int64_t rows = offsets_.back();
    if (d.taps < 1 || static_cast<int64_t>(d.pos_index.size()) != rows * d.taps ||
        d.pos_weight.size() != d.pos_index.size())
      fail("position taps must be rows x taps");
    for (int32_t i : d.pos_index)
      if (i < 0 || i >= d.pos_table_rows) fail("position tap " + std::to_string(i) + " outside the table");
    if (d.rope_half < 1 || static_cast<int64_t>(d.rope_cos.size()) != rows * d.rope_half ||
        d.rope_sin.size() != d.rope_cos.size())
      fail("rotary tables must be rows x rope_half");
    pos_index_.assign(d.pos_index.begin(), d.pos_index.end());
    pos_weight_.assign(d.pos_weight.begin(), d.pos_weight.end());
    rope_cos_.assign(d.rope_cos.begin(), d.rope_cos.end());
    rope_sin_.assign(d.rope_sin.begin(), d.rope_sin.end());
  }
  virtual ~VisionPlan() = default;
  VisionPlan(const VisionPlan&) = delete;
  VisionPlan& operator=(const VisionPlan&) = delete;

  int64_t num_rows() const { return offsets_.back(); }
  int64_t num_segments() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  // Segment s holds rows [offsets()[s], offsets()[s + 1]).
  const std::vector<int64_t>& offsets() const { return offsets_; }
  int64_t max_segment() const { return max_segment_; }
  int64_t taps() const { return taps_; }
  int64_t pos_table_rows() const { return pos_table_rows_; }
  const std::vector<int32_t>& pos_index() const { return pos_index_; }
  const std::vector<float>& pos_weight() const { return pos_weight_; }
  int64_t rope_half() const { return rope_half_; }
  const std::vector<float>& rope_cos() const { return rope_cos_; }
  const std::vector<float>& rope_sin() const { return rope_sin_; }

 private:
  int64_t taps_, pos_table_rows_, rope_half_;
  int64_t max_segment_ = 0;
  std::vector<int64_t> offsets_;
  std::vector<int32_t> pos_index_;
  std::vector<float> pos_weight_, rope_cos_, rope_sin_;
};

}  // namespace ds::kernels
