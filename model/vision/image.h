// RgbImage: 8-bit RGB pixels, row-major, 3 bytes a pixel; what every decoder produces and the
// image processor reads. ImageError: why an image was refused, worded for the client (the
// server answers it with a 400).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds::vision {

struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3

  RgbImage() = default;
  RgbImage(int64_t w, int64_t h) : width(w), height(h), rgb(static_cast<size_t>(w * h * 3)) {}
  int64_t pixels() const { return width * height; }
  const uint8_t* row(int64_t y) const { return rgb.data() + y * width * 3; }
  uint8_t* row(int64_t y) { return rgb.data() + y * width * 3; }
};

class ImageError : public std::runtime_error {
 public:
  explicit ImageError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace ds::vision
