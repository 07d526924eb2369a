// FP8 checkpoints: the e4m3fn codec against the format's definition, block quantisation, and
// the bundled tiny checkpoint re-written in the layout of Qwen's -FP8 releases (F8_E4M3
// weights + `weight_scale_inv` per 128x128 block, quantization_config in config.json): the
// loader's weights against a dequantisation written here, the logits against the bf16
// model's, --quantization fp8 against the written checkpoint, and corrupt variants. Last, the
// bundled FP8 fixture (tests/data/tiny-qwen35-fp8): its partial blocks, and corrupt copies.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "kernels/common/half.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/qwen35/checkpoint.h"
#include "model/qwen35/fp8.h"
#include "model/qwen35/model.h"
#include "tests/model/harness.h"
#include "tests/model/st_writer.h"
#include "tests/test_paths.h"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;
namespace t = ds::test;
namespace q = ds::qwen35;
namespace fp8 = ds::qwen35::fp8;

namespace {

const std::string kP = "model.language_model.";
const std::vector<int32_t> kPrompt = {17, 512, 1005, 3, 1023, 640, 88};

// The e4m3fn value of a code, from the OCP FP8 definition, in double.
double e4m3_reference(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  const double mag = e == 0 ? (m / 8.0) * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -mag : mag;
}

// The linear weights Qwen's FP8 releases store as F8_E4M3.
bool is_fp8_target(const std::string& name) {
  for (const char* m : {"q_proj.", "k_proj.", "v_proj.", "o_proj.", "gate_proj.", "up_proj.", "down_proj.",
                        "in_proj_qkv.", "in_proj_z.", "out_proj."})
    if (name.find(m) != std::string::npos && name.rfind("model.visual.", 0) != 0) return true;
  return false;
}

std::vector<float> f32_values(const t::StTensor& ts) {
  const t::StTensor f = ts.dtype == "F32" ? ts : t::bf16_to(ts, "F32");
  std::vector<float> v(f.bytes.size() / 4);
  std::memcpy(v.data(), f.bytes.data(), f.bytes.size());
  return v;
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The tensors with every FP8 target quantised (codes + f32 scales), as a release stores them.
t::StTensors to_fp8(const t::StTensors& in) {
  t::StTensors out;
  for (const auto& [name, ts] : in) {
    if (!is_fp8_target(name)) {
      out[name] = ts;
      continue;
    }
    const fp8::BlockShape bs{ts.shape[0], ts.shape[1]};
    const fp8::Quantized qz = fp8::quantize(bs, f32_values(ts));
    out[name] = {"F8_E4M3", ts.shape, qz.codes};
    out[name + "_scale_inv"] = {"F32", {bs.scale_rows(), bs.scale_cols()}, bytes_of(qz.scales)};
  }
  return out;
}

void edit_config(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(t::read_text(dir / "config.json"));
  edit(j);
  t::write_text(dir / "config.json", j.dump(2));
}

nlohmann::json quantization_config() {
  return {{"quant_method", "fp8"},
          {"fmt", "e4m3"},
          {"activation_scheme", "dynamic"},
          {"weight_block_size", {128, 128}},
          {"modules_to_not_convert", {"lm_head", "model.language_model.embed_tokens", "linear_attn.in_proj_a",
                                      "linear_attn.in_proj_b", "linear_attn.conv1d"}}};
}

// The tiny checkpoint in the FP8 layout (tensors passed through edit after quantising).
void write_fp8_tiny(const fs::path& dir, const std::function<void(t::StTensors&)>& edit = {}) {
  t::copy_tiny_configs(dir);
  edit_config(dir, [](nlohmann::json& j) { j["quantization_config"] = quantization_config(); });
  t::StTensors ts = to_fp8(t::read_safetensors(t::tiny_dir() / "model.safetensors"));
  if (edit) edit(ts);
  t::write_safetensors(dir / "model.safetensors", ts);
}

std::vector<float> logits_of(const fs::path& dir, const q::LoadOptions& options = {}) {
  t::Harness h(dir, 64, 4, 4, options);
  return h.prefill(h.add_sequence(), kPrompt);
}

std::string load_error(const fs::path& dir) {
  auto be = ds::kernels::cpu::make_cpu_backend();
  try {
    q::Model::load(*be, dir);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

std::vector<float> host(ds::kernels::Backend& be, const ds::kernels::Tensor& x) {
  std::vector<float> v(static_cast<size_t>(x.numel()));
  be.copy_to_host(x, v);
  return v;
}

double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("fp8: e4m3fn decoding is exact on all 256 codes", "[fp8]") {
  for (int c = 0; c < 256; ++c) {
    const float v = fp8::e4m3_to_f32(static_cast<uint8_t>(c));
    if ((c & 0x7f) == 0x7f) {
      CHECK(std::isnan(v));
    } else {
      INFO("code " << c);
      CHECK(static_cast<double>(v) == e4m3_reference(c));
    }
  }
  // Anchors from the format's definition.
  CHECK(fp8::e4m3_to_f32(0x7e) == 448.0f);
  CHECK(fp8::e4m3_to_f32(0xfe) == -448.0f);
  CHECK(fp8::e4m3_to_f32(0x38) == 1.0f);
  CHECK(fp8::e4m3_to_f32(0x08) == 0.015625f);         // smallest normal, 2^-6
  CHECK(fp8::e4m3_to_f32(0x01) == 0.001953125f);      // smallest subnormal, 2^-9
  CHECK(std::signbit(fp8::e4m3_to_f32(0x80)));        // -0
}

TEST_CASE("fp8: encoding is round to nearest, ties to even, saturating at 448", "[fp8]") {
  // Brute force over the finite codes of x's sign; ties go to the even mantissa.
  auto nearest = [](float x) {
    int best = -1;
    double best_d = 0;
    const int sign = std::signbit(x) ? 0x80 : 0;
    for (int m = 0; m < 0x7f; ++m) {
      const int c = sign | m;
      const double d = std::fabs(e4m3_reference(c) - x);
      if (best < 0 || d < best_d || (d == best_d && (c & 1) == 0)) best = c, best_d = d;
    }
    return best;
  };
  std::vector<float> xs;
  for (int c = 0; c < 0x7e; ++c) {  // every code, and every midpoint between neighbours
    const double a = e4m3_reference(c), b = e4m3_reference(c + 1);
    for (double x : {a, (a + b) / 2, a + (b - a) * 0.26, a + (b - a) * 0.74}) {
      xs.push_back(static_cast<float>(x));
      xs.push_back(static_cast<float>(-x));
    }
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> expo(-14.0f, 9.5f);
  for (int i = 0; i < 20000; ++i) xs.push_back((i & 1 ? -1.0f : 1.0f) * std::exp2(expo(rng)));
  for (float x : xs) {
    if (std::fabs(x) >= 448.0f) continue;
    INFO("x = " << x);
    REQUIRE(fp8::f32_to_e4m3(x) == nearest(x));
  }
  CHECK(fp8::f32_to_e4m3(448.0f) == 0x7e);
  CHECK(fp8::f32_to_e4m3(460.0f) == 0x7e);
  CHECK(fp8::f32_to_e4m3(-1e9f) == 0xfe);
  CHECK(fp8::f32_to_e4m3(std::numeric_limits<float>::infinity()) == 0x7e);
  CHECK(fp8::f32_to_e4m3(std::numeric_limits<float>::quiet_NaN()) == 0x7f);
  CHECK(fp8::f32_to_e4m3(0.0f) == 0x00);
  CHECK(fp8::f32_to_e4m3(-0.0f) == 0x80);
  CHECK(fp8::f32_to_e4m3(1e-40f) == 0x00);   // an f32 subnormal
  CHECK(fp8::f32_to_e4m3(-0.0009765625f) == 0x80);  // -2^-10: the tie between 0 and 2^-9 goes to 0
  CHECK(fp8::f32_to_e4m3(0.0029296875f) == 0x02);   // 1.5 * 2^-9: the tie goes to the even code 2
}

TEST_CASE("fp8: block quantisation with partial edge blocks", "[fp8]") {
  const fp8::BlockShape bs{300, 200};  // blocks of 128: 3 x 2, the last row and column partial
  REQUIRE(bs.scale_rows() == 3);
  REQUIRE(bs.scale_cols() == 2);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> w(300 * 200);
  for (auto& x : w) x = nd(rng);
  for (int j = 0; j < 200; ++j) w[static_cast<size_t>(130 * 200 + j)] = 0;  // a zero row in block row 1
  for (int i = 256; i < 300; ++i)  // the bottom-right (partial) block is all zero: scale 1
    for (int j = 128; j < 200; ++j) w[static_cast<size_t>(i * 200 + j)] = 0;
  const fp8::Quantized qz = fp8::quantize(bs, w);
  const std::vector<float> d = fp8::dequantize(bs, qz.codes, qz.scales);
  for (int bi = 0; bi < 3; ++bi)
    for (int bj = 0; bj < 2; ++bj) {
      float amax = 0;
      for (int i = bi * 128; i < std::min(300, bi * 128 + 128); ++i)
        for (int j = bj * 128; j < std::min(200, bj * 128 + 128); ++j) amax = std::max(amax, std::fabs(w[i * 200 + j]));
      CHECK(qz.scales[static_cast<size_t>(bi * 2 + bj)] == (amax > 0 ? amax / 448.0f : 1.0f));
    }
  for (int i = 0; i < 300; ++i)
    for (int j = 0; j < 200; ++j) {
      const size_t k = static_cast<size_t>(i * 200 + j);
      const float scale = qz.scales[static_cast<size_t>((i / 128) * 2 + j / 128)];
      CHECK(d[k] == static_cast<float>(e4m3_reference(qz.codes[k])) * scale);
      // Three mantissa bits: half a step is 1/16 of the value (2^-10 of the scale below 2^-6).
      REQUIRE(std::fabs(d[k] - w[k]) <= std::max(std::fabs(w[k]) / 16, scale / 1024) * 1.0001f);
    }
}

TEST_CASE("fp8: quantising on several threads gives each band of block rows what it gives alone", "[fp8]") {
  // 200 bands of 128 rows x 130 columns (a partial column block): large enough that quantize
  // splits the bands over the machine's threads (two on CI).
  const int64_t rows = 128 * 200, cols = 130;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (auto& x : w) x = nd(rng);
  const fp8::Quantized whole = fp8::quantize(fp8::BlockShape{rows, cols}, w);
  bool same = true;
  for (int64_t b = 0; b < 200; ++b) {
    const auto first = w.begin() + b * 128 * cols;
    const std::vector<float> band(first, first + 128 * cols);
    const fp8::Quantized alone = fp8::quantize(fp8::BlockShape{128, cols}, band);
    same = same && std::equal(alone.codes.begin(), alone.codes.end(), whole.codes.begin() + b * 128 * cols) &&
           std::equal(alone.scales.begin(), alone.scales.end(), whole.scales.begin() + b * 2);
  }
  CHECK(same);

  std::vector<int> hits(1000, 0);
  fp8::for_ranges(1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
  });
  CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
}

TEST_CASE("fp8: the loader dequantises an FP8 checkpoint exactly, partial blocks included", "[fp8][loading]") {
  t::TempDir dir;
  // intermediate_size 320 (of the tiny model's 384) makes gate/up [320, 128] and down
  // [128, 320]: partial blocks along both dimensions.
  write_fp8_tiny(dir.path(), [](t::StTensors& ts) {
    for (int l = 0; l < 8; ++l) {
      const std::string p = kP + "layers." + std::to_string(l) + ".mlp.";
      for (const char* m : {"gate_proj", "up_proj"}) {
        auto& w = ts[p + m + ".weight"];
        w.shape = {320, 128};
        w.bytes.resize(320 * 128);
        auto& s = ts[p + m + ".weight_scale_inv"];
        s.shape = {3, 1};
        s.bytes.resize(3 * 4);
      }
      // down [128, 384] -> [128, 320]: rows keep their first 320 codes; scales [1, 3] stay.
      auto& d = ts[p + "down_proj.weight"];
      std::vector<uint8_t> cut;
      for (int i = 0; i < 128; ++i) cut.insert(cut.end(), d.bytes.begin() + i * 384, d.bytes.begin() + i * 384 + 320);
      d = {"F8_E4M3", {128, 320}, cut};
    }
  });
  edit_config(dir.path(), [](nlohmann::json& j) { j["text_config"]["intermediate_size"] = 320; });
  const t::StTensors ts = t::read_safetensors(dir / "model.safetensors");
  const q::ModelConfig config = q::ModelConfig::load(dir.path());
  REQUIRE(config.fp8);
  CHECK(config.fp8->modules_to_not_convert.size() == 5);
  auto be = ds::kernels::cpu::make_cpu_backend();
  const q::ModelWeights w = q::load_weights(*be, q::Checkpoint(dir.path()), config);

  // The dequantisation written here: reference decode x the block's f32 scale.
  auto manual = [&](const std::string& name) {
    const auto& codes = ts.at(name);
    const auto& sc = ts.at(name + "_scale_inv");
    std::vector<float> scales(sc.bytes.size() / 4);
    std::memcpy(scales.data(), sc.bytes.data(), sc.bytes.size());
    const int64_t rows = codes.shape[0], cols = codes.shape[1], scols = sc.shape[1];
    REQUIRE(sc.shape[0] == (rows + 127) / 128);
    std::vector<float> out;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        out.push_back(static_cast<float>(e4m3_reference(codes.bytes[static_cast<size_t>(i * cols + j)])) *
                      scales[static_cast<size_t>((i / 128) * scols + j / 128)]);
    return out;
  };
  auto concat = [](std::vector<std::vector<float>> parts) {
    std::vector<float> all;
    for (auto& p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
  };
  for (int l : {0, 3}) {
    const std::string p = kP + "layers." + std::to_string(l) + ".";
    const auto& L = w.layers[static_cast<size_t>(l)];
    CHECK(host(*be, L.gate_up) == concat({manual(p + "mlp.gate_proj.weight"), manual(p + "mlp.up_proj.weight")}));
    CHECK(host(*be, L.down) == manual(p + "mlp.down_proj.weight"));
    if (l == 3) {
      CHECK(host(*be, L.attn.qkv_proj) == concat({manual(p + "self_attn.q_proj.weight"),
                                                  manual(p + "self_attn.k_proj.weight"),
                                                  manual(p + "self_attn.v_proj.weight")}));
      CHECK(host(*be, L.attn.o_proj) == manual(p + "self_attn.o_proj.weight"));
    } else {
      // FP8 in_proj_qkv/z stacked with the bf16 in_proj_b/a.
      CHECK(host(*be, L.deltanet.in_proj) ==
            concat({manual(p + "linear_attn.in_proj_qkv.weight"), manual(p + "linear_attn.in_proj_z.weight"),
                    f32_values(ts.at(p + "linear_attn.in_proj_b.weight")),
                    f32_values(ts.at(p + "linear_attn.in_proj_a.weight"))}));
      CHECK(host(*be, L.deltanet.out_proj) == manual(p + "linear_attn.out_proj.weight"));
    }
  }
  CHECK(host(*be, w.embed) == f32_values(ts.at(kP + "embed_tokens.weight")));
}

TEST_CASE("fp8: logits of the FP8 checkpoint and of --quantization fp8", "[fp8][loading]") {
  t::TempDir dir;
  write_fp8_tiny(dir.path());
  const std::vector<float> bf16 = logits_of(t::tiny_dir());
  const std::vector<float> from_fp8 = logits_of(dir.path());
  REQUIRE(from_fp8.size() == bf16.size());
  // FP8's error through the tiny model's 8 layers of random weights: relative L2 of all
  // logits measured at 0.077 (every linear weight off by up to 1/16 of itself).
  const double err = relative_l2(from_fp8, bf16);
  CHECK(err > 1e-3);  // the weights did change
  CHECK(err < 0.1);
  size_t agree = 0;  // greedy tokens
  for (size_t r = 0; r < kPrompt.size(); ++r) {
    auto row = [&](const std::vector<float>& l) { return l.begin() + static_cast<long>(r * 1024); };
    agree += std::max_element(row(from_fp8), row(from_fp8) + 1024) - row(from_fp8) ==
             std::max_element(row(bf16), row(bf16) + 1024) - row(bf16);
  }
  INFO("relative L2 " << err);
  CHECK(agree == kPrompt.size());

  // Load-time quantisation is the same quantisation: bit-identical logits.
  const q::LoadOptions quantize{q::Quantization::fp8};
  CHECK(logits_of(t::tiny_dir(), quantize) == from_fp8);
  // ... and a no-op on a checkpoint that is FP8 already.
  CHECK(logits_of(dir.path(), quantize) == from_fp8);

  SECTION("bf16 scales (as Qwen's releases store them) load too") {
    t::TempDir b;
    write_fp8_tiny(b.path(), [](t::StTensors& ts) {
      for (auto& [name, x] : ts) {
        if (name.find("_scale_inv") == std::string::npos) continue;
        std::vector<float> s(x.bytes.size() / 4);
        std::memcpy(s.data(), x.bytes.data(), x.bytes.size());
        std::vector<uint16_t> h;
        for (float f : s) h.push_back(ds::f32_to_bf16(f));
        x = {"BF16", x.shape, bytes_of(h)};
      }
    });
    CHECK(relative_l2(logits_of(b.path()), bf16) < 0.1);
  }
  SECTION("sharded") {
    t::TempDir s;
    t::copy_tiny_configs(s.path());
    edit_config(s.path(), [](nlohmann::json& j) { j["quantization_config"] = quantization_config(); });
    // Each weight in one shard and its scale in the other.
    std::vector<t::StTensors> shards(2);
    nlohmann::json index = {{"weight_map", nlohmann::json::object()}};
    for (auto& [name, x] : t::read_safetensors(dir / "model.safetensors")) {
      const int k = name.find("_scale_inv") != std::string::npos ? 1 : 0;
      shards[static_cast<size_t>(k)][name] = x;
      index["weight_map"][name] = "model-0000" + std::to_string(k + 1) + "-of-00002.safetensors";
    }
    for (int k = 0; k < 2; ++k)
      t::write_safetensors(s / ("model-0000" + std::to_string(k + 1) + "-of-00002.safetensors"),
                           shards[static_cast<size_t>(k)]);
    t::write_text(s / "model.safetensors.index.json", index.dump());
    CHECK(logits_of(s.path()) == from_fp8);
  }
}

TEST_CASE("fp8: a corrupt FP8 checkpoint names the tensor", "[fp8][loading]") {
  t::TempDir dir;
  const std::string o = kP + "layers.3.self_attn.o_proj.weight";
  SECTION("missing scale") {
    write_fp8_tiny(dir.path(), [&](t::StTensors& ts) { ts.erase(o + "_scale_inv"); });
    CHECK_THAT(load_error(dir.path()),
               Contains("model.safetensors: tensor " + o + " is stored as F8_E4M3 but its scale " + o +
                        "_scale_inv is missing"));
  }
  SECTION("wrong scale shape") {
    write_fp8_tiny(dir.path(), [&](t::StTensors& ts) { ts[o + "_scale_inv"].shape = {16, 1}; });
    CHECK_THAT(load_error(dir.path()),
               Contains("tensor " + o + "_scale_inv has shape [16, 1], expected [1, 16]"));
  }
  SECTION("scale of an unsupported dtype") {
    write_fp8_tiny(dir.path(), [&](t::StTensors& ts) { ts[o + "_scale_inv"].dtype = "I32"; });
    CHECK_THAT(load_error(dir.path()), Contains(o + "_scale_inv has dtype I32, expected F32 or BF16"));
  }
  SECTION("a scale beside a bf16 weight") {
    const std::string a = kP + "layers.0.linear_attn.in_proj_a.weight";
    write_fp8_tiny(dir.path(), [&](t::StTensors& ts) { ts[a + "_scale_inv"] = ts.at(o + "_scale_inv"); });
    CHECK_THAT(load_error(dir.path()), Contains("tensor " + a + " is stored as BF16 but has a scale"));
  }
  SECTION("FP8 weights without quantization_config") {
    write_fp8_tiny(dir.path());
    edit_config(dir.path(), [](nlohmann::json& j) { j.erase("quantization_config"); });
    CHECK_THAT(load_error(dir.path()), Contains("is stored as F8_E4M3 but config.json has no fp8 quantization_config"));
  }
  SECTION("an FP8 norm") {
    const std::string n = kP + "norm.weight";
    write_fp8_tiny(dir.path(), [&](t::StTensors& ts) { ts[n] = {"F8_E4M3", {128}, std::vector<uint8_t>(128, 0x38)}; });
    CHECK_THAT(load_error(dir.path()), Contains("tensor " + n + " is stored as F8_E4M3, which only 2-D weights may be"));
  }
  SECTION("quantization_config the loader cannot honour") {
    write_fp8_tiny(dir.path());
    using Edit = std::pair<std::function<void(nlohmann::json&)>, std::string>;
    for (const auto& [edit, message] : std::vector<Edit>{
             {[](nlohmann::json& q) { q["fmt"] = "e5m2"; }, "quantization_config: fmt \"e5m2\" is not supported"},
             {[](nlohmann::json& q) { q["quant_method"] = "bitsandbytes"; }, "quant_method bitsandbytes is not supported"},
             {[](nlohmann::json& q) { q["weight_block_size"] = {64, 64}; }, "weight_block_size [64,64] is not supported"},
             {[](nlohmann::json& q) { q.erase("weight_block_size"); }, "per-tensor FP8 scales are not supported"},
             {[](nlohmann::json& q) { q["activation_scheme"] = "static"; }, "activation_scheme \"static\" is not supported"},
             {[](nlohmann::json& q) { q["modules_to_not_convert"] = "lm_head"; }, "modules_to_not_convert is not a list"}}) {
      edit_config(dir.path(), [&](nlohmann::json& j) {
        j["quantization_config"] = quantization_config();
        edit(j["quantization_config"]);
      });
      CHECK_THAT(load_error(dir.path()), Contains("config.json: quantization_config: ") && Contains(message));
    }
  }
}

// The bundled FP8 fixture (tests/data/tiny-qwen35-fp8, written by bench/tools/make_fp8_fixture.py:
// the tiny model narrowed to hidden 96 and intermediate 320, so that block edges fall inside
// the matrices). Hidden tag: tests/model/CMakeLists.txt runs these as their own CTest entry,
// registered where the fixture is.
TEST_CASE("fp8: the bundled FP8 fixture has partial blocks in both dimensions", "[.fp8-fixture]") {
  const fs::path fx = t::data_path("tiny-qwen35-fp8");
  const q::ModelConfig config = q::ModelConfig::load(fx);
  REQUIRE(config.fp8);
  CHECK(config.hidden_size % fp8::kBlock != 0);
  CHECK(config.intermediate_size % fp8::kBlock != 0);
  const t::StTensors ts = t::read_safetensors(fx / "model.safetensors");
  const std::string gate = kP + "layers.0.mlp.gate_proj.weight", down = kP + "layers.0.mlp.down_proj.weight";
  const std::vector<int64_t> gate_shape{config.intermediate_size, config.hidden_size};
  CHECK(ts.at(gate).dtype == "F8_E4M3");
  CHECK(ts.at(gate).shape == gate_shape);
  CHECK(ts.at(gate + "_scale_inv").shape == std::vector<int64_t>{3, 1});  // ceil(320/128), ceil(96/128)
  CHECK(ts.at(down + "_scale_inv").shape == std::vector<int64_t>{1, 3});
  int fp8_weights = 0;
  for (const auto& [name, x] : ts) fp8_weights += x.dtype == "F8_E4M3";
  CHECK(fp8_weights == 50);  // 8 MLPs x 3, 2 attention layers x 4, 6 DeltaNets x 3
  CHECK(ts.at(kP + "layers.0.linear_attn.in_proj_a.weight").dtype == "BF16");
  CHECK(ts.at(kP + "embed_tokens.weight").dtype == "BF16");
}

TEST_CASE("fp8: a corrupt copy of the bundled FP8 fixture names the tensor", "[.fp8-fixture]") {
  const fs::path fx = t::data_path("tiny-qwen35-fp8");
  t::TempDir dir;
  for (const char* f : {"config.json", "generation_config.json"}) fs::copy_file(fx / f, dir / f);
  const t::StTensors good = t::read_safetensors(fx / "model.safetensors");
  const std::string gate = kP + "layers.0.mlp.gate_proj.weight", down = kP + "layers.0.mlp.down_proj.weight";
  auto write = [&](const std::function<void(t::StTensors&)>& edit) {
    t::StTensors ts = good;
    edit(ts);
    t::write_safetensors(dir / "model.safetensors", ts);
  };
  SECTION("the copy loads") {
    write([](t::StTensors&) {});
    CHECK(load_error(dir.path()) == "no error");
  }
  SECTION("scales counted by floor division drop the partial blocks") {
    write([&](t::StTensors& ts) {
      auto& s = ts[gate + "_scale_inv"];
      s.shape = {2, 1};
      s.bytes.resize(2 * 4);
    });
    CHECK_THAT(load_error(dir.path()),
               Contains("tensor " + gate + "_scale_inv has shape [2, 1], expected [3, 1] (one scale per 128x128 "
                        "block of [320, 96])"));
  }
  SECTION("transposed scales") {
    write([&](t::StTensors& ts) { ts[down + "_scale_inv"].shape = {3, 1}; });
    CHECK_THAT(load_error(dir.path()), Contains("tensor " + down + "_scale_inv has shape [3, 1], expected [1, 3]"));
  }
  SECTION("codes of a partial-block weight cut short") {
    write([&](t::StTensors& ts) {
      auto& w = ts[down];
      w.shape = {96, 256};
      w.bytes.resize(96 * 256);
    });
    CHECK_THAT(load_error(dir.path()), Contains("tensor " + down + " has shape [96, 256], expected [96, 320]"));
  }
}
