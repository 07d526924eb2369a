// The image processor (model/vision/processor.h) and the resize: smart_resize's arithmetic
// (Python's rounding included), the patch order against a literal transcription of HF's
// 9-axis reshape and permute, the normalisation, and the resize's invariants. Against HF
// itself: [vl-fixture] below.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "encode_images.h"
#include "model/vision/decode.h"
#include "model/vision/processor.h"
#include "model/vision/resize.h"

using namespace ds::vision;

TEST_CASE("smart_resize: HF's arithmetic") {
  auto sr = [](int64_t h, int64_t w, int64_t lo, int64_t hi) {
    const ResizeTarget t = smart_resize(h, w, 32, lo, hi);
    return std::make_pair(t.height, t.width);
  };
  // The fixture's cases (scripts/make_vl_fixture.py), min 64x64, max 128x128.
  CHECK(sr(96, 96, 4096, 16384) == std::make_pair(int64_t{96}, int64_t{96}));
  CHECK(sr(70, 150, 4096, 16384) == std::make_pair(int64_t{64}, int64_t{160}));
  CHECK(sr(300, 200, 4096, 16384) == std::make_pair(int64_t{128}, int64_t{96}));
  CHECK(sr(24, 40, 4096, 16384) == std::make_pair(int64_t{64}, int64_t{96}));
  CHECK(sr(90, 120, 4096, 16384) == std::make_pair(int64_t{96}, int64_t{128}));
  CHECK(sr(300, 200, 1024, 6144) == std::make_pair(int64_t{96}, int64_t{64}));
  // Halves round to even, as Python's round: 48/32 = 1.5 -> 2, 80/32 = 2.5 -> 2.
  CHECK(sr(48, 80, 1, 1 << 30) == std::make_pair(int64_t{64}, int64_t{64}));
  // The released config (256^2 .. 4096^2).
  CHECK(sr(1024, 1024, 65536, 16777216) == std::make_pair(int64_t{1024}, int64_t{1024}));
  CHECK(sr(10, 1000, 65536, 16777216).first % 32 == 0);
  CHECK_THROWS_AS(smart_resize(1, 201, 32, 1, 1 << 30), ImageError);
}

TEST_CASE("write_patches: HF's patch order and normalisation") {
  ImageProcessorConfig c;
  c.patch_size = 4;
  c.merge_size = 2;
  c.temporal_patch_size = 2;
  c.mean = {0.5f, 0.25f, 0.125f};
  c.std = {0.5f, 0.75f, 0.3f};
  ProcessedImage p;
  p.resized = test::picture(24, 16, 11);  // 6 x 4 patches of 4
  p.grid_h = 4;
  p.grid_w = 6;
  const int64_t T = 2, P = 4, m = 2, gh = 4, gw = 6;
  std::vector<float> got(static_cast<size_t>(p.num_patches() * 3 * T * P * P));
  write_patches(p, c, T, got);
  // HF: patches [T, C, H, W] -> view (1, T, C, gh/m, m, P, gw/m, m, P) -> permute
  // (0, 3, 6, 4, 7, 2, 1, 5, 8) -> rows of C*T*P*P. Walk the permuted axes in order.
  size_t k = 0;
  int bad = 0;
  for (int64_t bh = 0; bh < gh / m; ++bh)
    for (int64_t bw = 0; bw < gw / m; ++bw)
      for (int64_t ih = 0; ih < m; ++ih)
        for (int64_t iw = 0; iw < m; ++iw)
          for (int64_t ch = 0; ch < 3; ++ch)
            for (int64_t t = 0; t < T; ++t)
              for (int64_t y = 0; y < P; ++y)
                for (int64_t x = 0; x < P; ++x) {
                  const int64_t row = (bh * m + ih) * P + y, col = (bw * m + iw) * P + x;
                  const float v = p.resized.row(row)[3 * col + ch];
                  const float mean = c.mean[static_cast<size_t>(ch)] * 255.0f, sd = c.std[static_cast<size_t>(ch)] * 255.0f;
                  if (got[k++] != (v - mean) / sd) ++bad;
                }
  CHECK(bad == 0);
  // temporal = 1 is the same rows without the repeated copy.
  std::vector<float> one(static_cast<size_t>(p.num_patches() * 3 * P * P));
  write_patches(p, c, 1, one);
  for (int64_t n = 0; n < p.num_patches(); ++n)
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t i = 0; i < P * P; ++i)
        REQUIRE(one[static_cast<size_t>((n * 3 + ch) * P * P + i)] ==
                got[static_cast<size_t>(((n * 3 + ch) * T + 1) * P * P + i)]);
}

TEST_CASE("resize_bicubic: weights, constant images, identity-free axes") {
  for (auto [in, out] : {std::pair<int64_t, int64_t>{150, 160}, {300, 128}, {24, 64}, {4096, 1024}, {70, 64}}) {
    const AxisResample ax = bicubic_axis(in, out);
    for (int64_t i = 0; i < out; ++i) {
      int64_t sum = 0;
      for (int64_t j = 0; j < ax.count[static_cast<size_t>(i)]; ++j) sum += ax.weights[static_cast<size_t>(i * ax.taps + j)];
      // Each output's weights sum to 1 at the axis's precision, up to rounding each tap.
      REQUIRE(std::abs(sum - (int64_t{1} << ax.precision)) <= ax.taps);
      REQUIRE(ax.first[static_cast<size_t>(i)] + ax.count[static_cast<size_t>(i)] <= in);
    }
    CHECK(ax.precision >= 13);
  }
  RgbImage flat(50, 30);
  std::fill(flat.rgb.begin(), flat.rgb.end(), uint8_t{173});
  const RgbImage r = resize_bicubic(flat, 77, 13);
  CHECK(r.width == 77);
  CHECK(r.height == 13);
  for (uint8_t v : r.rgb) REQUIRE(v == 173);
  // Only the width changes: each row is resampled on its own.
  const RgbImage pic = test::picture(40, 8, 3);
  const RgbImage w = resize_bicubic(pic, 64, 8);
  for (int64_t y = 0; y < 8; ++y) {
    RgbImage one(40, 1);
    std::copy(pic.row(y), pic.row(y) + 120, one.rgb.begin());
    const RgbImage ow = resize_bicubic(one, 64, 1);
    REQUIRE(std::equal(ow.rgb.begin(), ow.rgb.end(), w.row(y)));
  }
}

TEST_CASE("ImageProcessorConfig: preprocessor_config.json and its refusals") {
  const auto dir = std::filesystem::temp_directory_path() / "ds_test_vision_cfg";
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& body) { std::ofstream(dir / "preprocessor_config.json") << body; };
  write(R"({"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16, "temporal_patch_size": 2,
            "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
            "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast"})");
  const ImageProcessorConfig c = ImageProcessorConfig::load(dir);
  CHECK(c.min_pixels == 65536);
  CHECK(c.max_pixels == 16777216);
  CHECK(c.factor() == 32);
  CHECK(c.mean[1] == 0.5f);
  write(R"({"resample": 2})");
  CHECK_THROWS_WITH(ImageProcessorConfig::load(dir), Catch::Contains("resample"));
  write(R"({"image_std": [0.5, 0, 0.5]})");
  CHECK_THROWS_WITH(ImageProcessorConfig::load(dir), Catch::Contains("image_std"));
  write(R"({"size": {"shortest_edge": 100, "longest_edge": 50}})");
  CHECK_THROWS_AS(ImageProcessorConfig::load(dir), std::runtime_error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("preprocess: per-request pixel bounds and the grid") {
  ImageProcessorConfig c;
  c.patch_size = 16;
  c.min_pixels = 4096;
  c.max_pixels = 16384;
  const RgbImage img = test::picture(200, 300, 9);
  const ProcessedImage a = preprocess(img, c);
  CHECK(a.grid_h == 8);
  CHECK(a.grid_w == 6);
  CHECK(a.num_tokens(2) == 12);
  const ProcessedImage b = preprocess(img, c, PixelBounds{1024, 6144});
  CHECK(b.grid_h == 6);
  CHECK(b.grid_w == 4);
  CHECK_THROWS_AS(preprocess(img, c, PixelBounds{9000, 8000}), ImageError);
  const ProcessedImage same = preprocess(test::picture(96, 96, 1), c);
  CHECK(same.resized.rgb == test::picture(96, 96, 1).rgb);
}
