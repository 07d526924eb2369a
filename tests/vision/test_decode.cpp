// The decoders (model/vision/decode.h) on images encoded by the same libraries: exact for the
// lossless formats, PIL's conversions to RGB, the first GIF frame, and every refusal (limits,
// corrupt and truncated data, unsupported kinds) an ImageError.
#include <png.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <random>

#include "encode_images.h"
#include "model/vision/decode.h"

using namespace ds::vision;
using ds::vision::test::picture;

namespace {

std::vector<uint8_t> channels_of(const RgbImage& img, int channels) {
  std::vector<uint8_t> out;
  for (int64_t i = 0; i < img.pixels(); ++i) {
    const uint8_t* p = img.rgb.data() + 3 * i;
    if (channels == 1) out.push_back(p[0]);
    if (channels == 2) out.insert(out.end(), {p[0], static_cast<uint8_t>(i % 251)});
    if (channels == 4) out.insert(out.end(), {p[0], p[1], p[2], static_cast<uint8_t>(i % 253)});
  }
  return out;
}

}  // namespace

TEST_CASE("PNG decodes to PIL's RGB: RGB, RGBA (alpha dropped), grey (+alpha), 16-bit, interlaced") {
  const RgbImage img = picture(37, 23, 1);
  SECTION("RGB, exact") {
    const RgbImage d = decode_image(test::encode_png(37, 23, 3, img.rgb));
    CHECK(d.width == 37);
    CHECK(d.height == 23);
    CHECK(d.rgb == img.rgb);
  }
  SECTION("RGBA: the colour channels as stored") {
    CHECK(decode_image(test::encode_png(37, 23, 4, channels_of(img, 4))).rgb == img.rgb);
  }
  SECTION("grey and grey + alpha replicate the grey") {
    for (int ch : {1, 2}) {
      const RgbImage d = decode_image(test::encode_png(37, 23, ch, channels_of(img, ch)));
      for (int64_t i = 0; i < img.pixels(); ++i)
        for (int c = 0; c < 3; ++c) REQUIRE(d.rgb[static_cast<size_t>(3 * i + c)] == img.rgb[static_cast<size_t>(3 * i)]);
    }
  }
  SECTION("16-bit samples give their high byte") {
    CHECK(decode_image(test::encode_png(37, 23, 3, img.rgb, 16)).rgb == img.rgb);
  }
  SECTION("Adam7 interlaced") { CHECK(decode_image(test::encode_png(37, 23, 3, img.rgb, 8, true)).rgb == img.rgb); }
  SECTION("palette looked up") {
    std::vector<uint8_t> pal, idx;
    for (int i = 0; i < 16; ++i) pal.insert(pal.end(), {static_cast<uint8_t>(i * 16), static_cast<uint8_t>(255 - i), 7});
    for (int64_t i = 0; i < 37 * 23; ++i) idx.push_back(static_cast<uint8_t>(i % 16));
    const RgbImage d = decode_image(test::encode_png_palette(37, 23, idx, pal));
    for (int64_t i = 0; i < 37 * 23; ++i)
      for (int c = 0; c < 3; ++c) REQUIRE(d.rgb[static_cast<size_t>(3 * i + c)] == pal[static_cast<size_t>(3 * (i % 16) + c)]);
  }
}

TEST_CASE("JPEG decodes close to its source; greyscale is replicated; CMYK and truncation refused") {
  const RgbImage img = picture(40, 30, 2);
  const RgbImage d = decode_image(test::encode_jpeg(img, 95));
  REQUIRE(d.width == 40);
  REQUIRE(d.height == 30);
  double err = 0;
  for (size_t i = 0; i < img.rgb.size(); ++i) err += std::abs(int(d.rgb[i]) - int(img.rgb[i]));
  CHECK(err / static_cast<double>(img.rgb.size()) < 8.0);
  const RgbImage g = decode_image(test::encode_jpeg(img, 90, true));
  for (int64_t i = 0; i < g.pixels(); ++i) {
    REQUIRE(g.rgb[static_cast<size_t>(3 * i)] == g.rgb[static_cast<size_t>(3 * i + 1)]);
    REQUIRE(g.rgb[static_cast<size_t>(3 * i)] == g.rgb[static_cast<size_t>(3 * i + 2)]);
  }
  auto bytes = test::encode_jpeg(img, 90);
  bytes.resize(bytes.size() / 2);
  CHECK_THROWS_AS(decode_image(bytes), ImageError);
}

TEST_CASE("WebP lossless is exact; animated WebP is refused") {
  const RgbImage img = picture(33, 19, 3);
  CHECK(decode_image(test::encode_webp_lossless(img)).rgb == img.rgb);
  // RIFF / WEBP / VP8X with the animation flag.
  std::vector<uint8_t> anim = {'R', 'I', 'F', 'F', 22, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'X', 10, 0, 0, 0,
                               0x02, 0, 0, 0, 9, 0, 0, 9, 0, 0};
  CHECK_THROWS_WITH(decode_image(anim), Catch::Contains("animated"));
}

TEST_CASE("GIF: the first frame over the screen, interlaced or not, local or global colours") {
  std::vector<uint8_t> global, local;
  for (int i = 0; i < 4; ++i) global.insert(global.end(), {static_cast<uint8_t>(60 * i), 10, 20});
  for (int i = 0; i < 4; ++i) local.insert(local.end(), {5, static_cast<uint8_t>(50 * i), 99});
  test::GifFrame first{2, 1, 5, 9, {}, local, true};
  for (int i = 0; i < 5 * 9; ++i) first.indices.push_back(static_cast<uint8_t>((i * 7) % 4));
  test::GifFrame second{0, 0, 8, 10, std::vector<uint8_t>(80, 3), {}, false};
  const RgbImage d = decode_image(test::encode_gif(8, 10, global, {first, second}));
  REQUIRE(d.width == 8);
  REQUIRE(d.height == 10);
  for (int y = 0; y < 10; ++y)
    for (int x = 0; x < 8; ++x) {
      const bool inside = x >= 2 && x < 7 && y >= 1 && y < 10;
      const int k = inside ? first.indices[static_cast<size_t>((y - 1) * 5 + (x - 2))] : 0;
      for (int c = 0; c < 3; ++c) REQUIRE(int(d.row(y)[3 * x + c]) == int(local[static_cast<size_t>(3 * k + c)]));
    }
}

TEST_CASE("limits: bytes, pixels, sides and time are refused before the work") {
  const RgbImage img = picture(64, 48, 4);
  const auto png = test::encode_png(64, 48, 3, img.rgb);
  DecodeLimits lim;
  lim.max_bytes = static_cast<int64_t>(png.size()) - 1;
  CHECK_THROWS_WITH(decode_image(png, lim), Catch::Contains("bytes"));
  lim = {};
  lim.max_pixels = 64 * 48 - 1;
  CHECK_THROWS_WITH(decode_image(png, lim), Catch::Contains("pixels"));
  lim = {};
  lim.max_side = 63;
  CHECK_THROWS_AS(decode_image(png, lim), ImageError);
  lim = {};
  lim.max_time = std::chrono::milliseconds(-1);
  for (const auto& bytes : {png, test::encode_jpeg(img, 80), test::encode_webp_lossless(img)})
    CHECK_THROWS_WITH(decode_image(bytes, lim), Catch::Contains("took longer"));
  // A header that claims 100000 x 100000 is refused from the header alone.
  auto huge = png;
  const uint8_t dims[8] = {0, 1, 0x86, 0xA0, 0, 1, 0x86, 0xA0};
  std::copy(dims, dims + 8, huge.begin() + 16);
  CHECK_THROWS_AS(decode_image(huge), ImageError);
}

TEST_CASE("unknown, empty, truncated and mutated data only ever give ImageError") {
  CHECK_THROWS_WITH(decode_image(std::vector<uint8_t>{}), Catch::Contains("empty"));
  CHECK_THROWS_WITH(decode_image(std::vector<uint8_t>{'B', 'M', 0, 0}), Catch::Contains("unsupported"));
  const RgbImage img = picture(24, 16, 5);
  std::vector<uint8_t> gpal;
  for (int i = 0; i < 4; ++i) gpal.insert(gpal.end(), {static_cast<uint8_t>(i), 0, 0});
  const std::vector<std::vector<uint8_t>> seeds = {
      test::encode_png(24, 16, 3, img.rgb), test::encode_png(24, 16, 3, img.rgb, 8, true), test::encode_jpeg(img, 85),
      test::encode_webp_lossless(img), test::encode_gif(4, 4, gpal, {{0, 0, 4, 4, std::vector<uint8_t>(16, 1), {}, false}})};
  std::mt19937 rng(7);
  int decoded = 0, refused = 0;
  for (const auto& s : seeds) {
    for (size_t cut : {size_t{8}, s.size() / 3, s.size() - 1}) {
      std::vector<uint8_t> t(s.begin(), s.begin() + static_cast<long>(cut));
      try {
        decode_image(t);
        ++decoded;
      } catch (const ImageError&) {
        ++refused;
      }
    }
    for (int k = 0; k < 200; ++k) {
      auto m = s;
      for (int j = 0; j < 4; ++j) m[rng() % m.size()] = static_cast<uint8_t>(rng());
      try {
        const RgbImage d = decode_image(m);
        REQUIRE(d.rgb.size() == static_cast<size_t>(d.width * d.height * 3));
        ++decoded;
      } catch (const ImageError&) {
        ++refused;
      }
    }
  }
  CHECK(refused > 0);
  CHECK(decoded + refused == 5 * 203);
}
