#include "model/vision/resize.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ds::vision {
namespace {

// Keys' cubic convolution kernel with a = -0.5, in the operation order torch evaluates it.
double cubic(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

uint8_t clamp_shift(int64_t acc, int precision) {
  return static_cast<uint8_t>(std::clamp<int64_t>(acc >> precision, 0, 255));
}

}  // namespace

AxisResample bicubic_axis(int64_t in_size, int64_t out_size) {
  if (in_size <= 0 || out_size <= 0) throw std::invalid_argument("bicubic_axis: empty axis");
  AxisResample r;
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
  r.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  std::vector<double> w(static_cast<size_t>(out_size * r.taps), 0.0);
  r.first.resize(static_cast<size_t>(out_size));
  r.count.resize(static_cast<size_t>(out_size));
  double wmax = 0.0;
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const int64_t xmin = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    int64_t xsize = std::min(static_cast<int64_t>(center + support + 0.5), in_size) - xmin;
    xsize = std::clamp(xsize, int64_t{0}, r.taps);
    double* wi = w.data() + i * r.taps;
    double total = 0.0;
    for (int64_t j = 0; j < xsize; ++j) {
      wi[j] = cubic((static_cast<double>(j + xmin) - center + 0.5) * invscale);
      total += wi[j];
    }
    if (total != 0.0)
      for (int64_t j = 0; j < xsize; ++j) {
        wi[j] /= total;
        wmax = std::max(wmax, wi[j]);
      }
    r.first[static_cast<size_t>(i)] = xmin;
    r.count[static_cast<size_t>(i)] = xsize;
  }
  int p = 0;
  for (p = 0; p < 22; ++p)
    if (static_cast<int>(0.5 + wmax * static_cast<double>(1 << (p + 1))) >= (1 << 15)) break;
  r.precision = p;
  r.weights.resize(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    const double v = w[k] * static_cast<double>(1 << p);
    r.weights[k] = static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return r;
}

RgbImage resize_bicubic(const RgbImage& src, int64_t out_width, int64_t out_height) {
  if (src.width <= 0 || src.height <= 0 || out_width <= 0 || out_height <= 0)
    throw std::invalid_argument("resize_bicubic: empty image");
  RgbImage cur = src;
  if (out_width != src.width) {
    const AxisResample ax = bicubic_axis(src.width, out_width);
    RgbImage dst(out_width, cur.height);
    const int64_t bias = int64_t{1} << (ax.precision - 1);
    for (int64_t y = 0; y < cur.height; ++y) {
      const uint8_t* in = cur.row(y);
      uint8_t* out = dst.row(y);
      for (int64_t x = 0; x < out_width; ++x) {
        const int16_t* wk = ax.weights.data() + x * ax.taps;
        const uint8_t* px = in + 3 * ax.first[static_cast<size_t>(x)];
        int64_t r = bias, g = bias, b = bias;
        for (int64_t j = 0; j < ax.count[static_cast<size_t>(x)]; ++j) {
          r += int64_t{px[3 * j]} * wk[j];
          g += int64_t{px[3 * j + 1]} * wk[j];
          b += int64_t{px[3 * j + 2]} * wk[j];
        }
        out[3 * x] = clamp_shift(r, ax.precision);
        out[3 * x + 1] = clamp_shift(g, ax.precision);
        out[3 * x + 2] = clamp_shift(b, ax.precision);
      }
    }
    cur = std::move(dst);
  }
  if (out_height != src.height) {
    const AxisResample ax = bicubic_axis(src.height, out_height);
    RgbImage dst(cur.width, out_height);
    const int64_t bias = int64_t{1} << (ax.precision - 1);
    const int64_t n = cur.width * 3;
    std::vector<int64_t> acc(static_cast<size_t>(n));
    for (int64_t y = 0; y < out_height; ++y) {
      std::fill(acc.begin(), acc.end(), bias);
      const int16_t* wk = ax.weights.data() + y * ax.taps;
      for (int64_t j = 0; j < ax.count[static_cast<size_t>(y)]; ++j) {
        const uint8_t* in = cur.row(ax.first[static_cast<size_t>(y)] + j);
        const int64_t w = wk[j];
        for (int64_t k = 0; k < n; ++k) acc[static_cast<size_t>(k)] += int64_t{in[k]} * w;
      }
      uint8_t* out = dst.row(y);
      for (int64_t k = 0; k < n; ++k) out[k] = clamp_shift(acc[static_cast<size_t>(k)], ax.precision);
    }
    cur = std::move(dst);
  }
  return cur;
}

}  // namespace ds::vision
