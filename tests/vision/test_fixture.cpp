// Our decoders against PIL's decoding of the fixture's images (HF's processor starts from
// PIL's Image.convert("RGB")): every file of tests/data/tiny-qwen35-vl/images, PNG (RGB,
// RGBA, grey, palette with transparency), JPEG (4:4:4 and 4:2:0), WebP (lossless and lossy)
// and the first frame of an animated GIF, pixel for pixel.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "model/qwen35/safetensors_file.h"
#include "model/vision/decode.h"
#include "tests/test_paths.h"

using namespace ds;

TEST_CASE("decoding matches PIL's on every fixture image", "[vl-fixture]") {
  const std::filesystem::path dir = test::data_path("tiny-qwen35-vl");
  const qwen35::SafetensorsFile ref(dir / "reference.safetensors");
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "images")) {
    const std::string name = entry.path().filename().string();
    const auto* want = ref.find("img." + name + ".rgb");
    REQUIRE(want != nullptr);
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const vision::RgbImage got = vision::decode_image(bytes);
    REQUIRE(want->shape == std::vector<int64_t>{got.height, got.width, 3});
    const auto* w = static_cast<const uint8_t*>(want->data);
    int64_t differ = 0;
    for (size_t i = 0; i < got.rgb.size(); ++i) differ += got.rgb[i] != w[i];
    INFO(name);
    CHECK(differ == 0);
    ++checked;
  }
  CHECK(checked == 9);
}
