// resize_bicubic: the antialiased bicubic resize that HF's default (torchvision) image
// processor runs on a uint8 image on the CPU, reproduced to the bit (docs/vision.md,
// "Preprocessing", step 3): per axis, Keys cubic weights (a = -0.5) over a support of
// 2 * max(1, in / out) input pixels, normalised in double and rounded to int16 at the axis's
// precision; width first, then height, each pass summed in integers, rounded and clamped to
// 0..255. An axis whose size does not change is copied.
#pragma once

#include <cstdint>
#include <vector>

#include "model/vision/image.h"

namespace ds::vision {

RgbImage resize_bicubic(const RgbImage& src, int64_t out_width, int64_t out_height);

// One axis's taps and int16 weights (exposed for tests): output i reads inputs
// [first[i], first[i] + count[i]) with weights[i * taps ...]; sum >> precision.
struct AxisResample {
  std::vector<int64_t> first, count;
  std::vector<int16_t> weights;  // out * taps
  int64_t taps = 0;
  int precision = 0;
};
AxisResample bicubic_axis(int64_t in_size, int64_t out_size);

}  // namespace ds::vision
