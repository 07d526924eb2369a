// The vision tower's weights as a checkpoint stores them (model/qwen35/vision_weights.h):
// copies of tests/data/tiny-qwen35-vl with the tower's matrices in Qwen's FP8 block layout
// (F32 or BF16 scales) encode as the bf16 tower does to FP8's precision; a missing, left-over
// or scale-less tensor is refused naming it.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/half.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/qwen35/checkpoint.h"
#include "model/qwen35/config.h"
#include "model/qwen35/fp8.h"
#include "model/qwen35/vision_encoder.h"
#include "tests/model/st_writer.h"
#include "tests/test_paths.h"

namespace t = ds::test;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

const fs::path kVl = t::data_path("tiny-qwen35-vl");

// A copy of the fixture with these tensors in its model.safetensors.
void write_copy(const fs::path& dir, const t::StTensors& tensors) {
  for (const auto& e : fs::directory_iterator(kVl))
    if (e.is_regular_file() && e.path().filename() != "model.safetensors" && e.path().filename() != "reference.safetensors")
      fs::copy_file(e.path(), dir / e.path().filename());
  t::write_safetensors(dir / "model.safetensors", tensors);
}

// The tower's output for two random images of 4 x 4 and 2 x 6 patches (f32, CPU).
std::vector<float> encode(const fs::path& dir) {
  auto be = ds::kernels::cpu::make_cpu_backend({.num_threads = 1});
  const auto config = ds::qwen35::ModelConfig::load(dir);
  auto enc = ds::qwen35::VisionEncoder::load(*be, dir, ds::qwen35::Checkpoint(dir), *config.vision);
  const std::vector<ds::qwen35::VisionGrid> grids = {{1, 4, 4}, {1, 2, 6}};
  std::vector<float> patches(static_cast<size_t>(28 * config.vision->patch_values()));
  std::mt19937 rng(47);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : patches) v = u(rng);
  const ds::kernels::Tensor out = enc->encode_patches(patches, grids);
  const float* p = out.data_as<const float>();
  return std::vector<float>(p, p + out.numel());
}

double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

// The bf16 matrix `name` as FP8 codes with its block scales (F32, or BF16 as the releases).
void to_fp8(t::StTensors& ts, const std::string& name, bool bf16_scales) {
  const t::StTensor w = t::bf16_to(ts.at(name), "F32");
  REQUIRE(w.shape.size() == 2);
  std::vector<float> v(w.bytes.size() / 4);
  std::memcpy(v.data(), w.bytes.data(), w.bytes.size());
  const ds::qwen35::fp8::BlockShape bs{w.shape[0], w.shape[1]};
  const auto q = ds::qwen35::fp8::quantize(bs, v);
  ts[name] = t::StTensor{"F8_E4M3", w.shape, q.codes};
  t::StTensor s{bf16_scales ? "BF16" : "F32", {bs.scale_rows(), bs.scale_cols()}, {}};
  for (float f : q.scales) {
    if (bf16_scales) {
      const uint16_t h = ds::f32_to_bf16(f);
      s.bytes.insert(s.bytes.end(), reinterpret_cast<const uint8_t*>(&h), reinterpret_cast<const uint8_t*>(&h) + 2);
    } else {
      s.bytes.insert(s.bytes.end(), reinterpret_cast<const uint8_t*>(&f), reinterpret_cast<const uint8_t*>(&f) + 4);
    }
  }
  ts[name + "_scale_inv"] = s;
}

}  // namespace

TEST_CASE("vision weights: an FP8 tower loads dequantised; missing, left-over and scale-less tensors are refused",
          "[model][vision]") {
  const t::StTensors all = t::read_safetensors(kVl / "model.safetensors");
  const std::vector<std::string> matrices = {"model.visual.blocks.0.attn.qkv.weight", "model.visual.blocks.1.mlp.linear_fc1.weight",
                                             "model.visual.merger.linear_fc1.weight"};
  SECTION("FP8 matrices with F32 or BF16 block scales") {
    const std::vector<float> bf16 = encode(kVl);
    for (bool bf16_scales : {false, true}) {
      INFO((bf16_scales ? "BF16" : "F32") << " scales");
      t::TempDir d;
      t::StTensors ts = all;
      for (const auto& m : matrices) to_fp8(ts, m, bf16_scales);
      write_copy(d.path(), ts);
      const std::vector<float> from_fp8 = encode(d.path());
      REQUIRE(from_fp8.size() == bf16.size());
      // e4m3 keeps 3 mantissa bits: a few percent (4% here), not the bf16 output itself (the
      // FP8 values were read) and not noise (the scales were applied).
      const double err = relative_l2(from_fp8, bf16);
      CHECK(err > 1e-3);
      CHECK(err < 0.08);
    }
  }
  SECTION("a missing tensor") {
    t::TempDir d;
    t::StTensors ts = all;
    ts.erase("model.visual.merger.norm.bias");
    write_copy(d.path(), ts);
    CHECK_THROWS_WITH(encode(d.path()), Contains("model.visual.merger.norm.bias") && Contains("missing"));
  }
  SECTION("a tensor the config does not describe") {
    t::TempDir d;
    t::StTensors ts = all;
    ts["model.visual.blocks.2.norm1.weight"] = ts.at("model.visual.blocks.1.norm1.weight");
    write_copy(d.path(), ts);
    CHECK_THROWS_WITH(encode(d.path()), Contains("model.visual.blocks.2.norm1.weight"));
  }
  SECTION("an FP8 matrix without its scale") {
    t::TempDir d;
    t::StTensors ts = all;
    to_fp8(ts, matrices[0], false);
    ts.erase(matrices[0] + "_scale_inv");
    write_copy(d.path(), ts);
    CHECK_THROWS_WITH(encode(d.path()), Contains(matrices[0]) && Contains("without its scale"));
  }
}
