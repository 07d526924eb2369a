// YaRN and config overrides: config.json's rope settings in both layouts as HF resolves them,
// the frequencies and attention factor (model/qwen35/rope.h) against HF's formulas evaluated
// here again in float64, and --hf-overrides' merge. (The kernels' rotation by such a table:
// tests/kernels_cpu/test_dense_ops.cpp; the model against HF itself past the original
// maximum: refcheck on tests/data/tiny-qwen35-yarn.)
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include <nlohmann/json.hpp>

#include "model/qwen35/config.h"
#include "model/qwen35/rope.h"

using Catch::Matchers::Contains;
using ds::qwen35::ModelConfig;
using nlohmann::json;

namespace {

// The 9B's text config (as config.json's text_config holds it) with YaRN as Qwen's model card
// sets it for 1M tokens.
json yarn_config(double factor = 4.0, int64_t original = 262144) {
  json rope = {{"rope_type", "yarn"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25},
               {"mrope_section", {11, 11, 10}}, {"mrope_interleaved", true},
               {"factor", factor}, {"original_max_position_embeddings", original}};
  json text = {{"model_type", "qwen3_5_text"}, {"vocab_size", 248320}, {"hidden_size", 4096},
               {"intermediate_size", 12288}, {"num_hidden_layers", 32}, {"num_attention_heads", 16},
               {"num_key_value_heads", 4}, {"head_dim", 256}, {"rms_norm_eps", 1e-6},
               {"linear_num_key_heads", 16}, {"linear_num_value_heads", 32}, {"linear_key_head_dim", 128},
               {"linear_value_head_dim", 128}, {"linear_conv_kernel_dim", 4}, {"full_attention_interval", 4},
               {"max_position_embeddings", 262144}, {"rope_parameters", rope}};
  return {{"model_type", "qwen3_5"}, {"text_config", text}};
}

std::string parse_error(const json& j, const std::string& overrides = "") {
  try {
    ModelConfig::parse(j.dump(), "", "config.json", overrides);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

// HF's _compute_yarn_parameters, in float64, written from its formulas.
struct F64Yarn {
  std::vector<double> inv_freq;
  double attention = 1;
};
F64Yarn f64_yarn(double theta, int dim, double factor, double original, double beta_fast = 32, double beta_slow = 1,
                 bool truncate = true) {
  auto corr = [&](double rot) { return dim * std::log(original / (rot * 2 * std::numbers::pi)) / (2 * std::log(theta)); };
  double low = corr(beta_fast), high = corr(beta_slow);
  if (truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;
  F64Yarn y;
  for (int i = 0; i < dim / 2; ++i) {
    const double pos = std::pow(theta, 2.0 * i / dim);
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double keep = 1 - ramp;
    y.inv_freq.push_back(1 / (factor * pos) * (1 - keep) + 1 / pos * keep);
  }
  y.attention = factor <= 1 ? 1.0 : 0.1 * std::log(factor) + 1;
  return y;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, double rel) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("i = " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= rel * want[i]);
  }
}

}  // namespace

TEST_CASE("yarn: config.json's rope settings as HF resolves them", "[yarn]") {
  const ModelConfig c = ModelConfig::parse(yarn_config().dump(), "");
  REQUIRE(c.yarn);
  CHECK(c.yarn->factor == 4.0);
  CHECK(c.yarn->original_max_positions == 262144);
  CHECK(c.yarn->beta_fast == 32);
  CHECK(c.yarn->beta_slow == 1);
  CHECK(c.yarn->attention_factor == Approx(0.1 * std::log(4.0) + 1).epsilon(1e-15));
  CHECK(c.yarn->truncate);
  CHECK(c.rotary_dim == 64);
  CHECK(c.max_position_embeddings == 262144);
  CHECK(c.max_positions() == 1048576);  // factor x original, more than max_position_embeddings

  SECTION("the text config's top-level original_max_position_embeddings wins (HF's standardize_rope_params)") {
    json j = yarn_config();
    j["text_config"]["original_max_position_embeddings"] = 32768;
    CHECK(ModelConfig::parse(j.dump(), "").yarn->original_max_positions == 32768);
  }
  SECTION("no original: max_position_embeddings; no factor: max / original") {
    json j = yarn_config();
    j["text_config"]["rope_parameters"].erase("original_max_position_embeddings");
    CHECK(ModelConfig::parse(j.dump(), "").yarn->original_max_positions == 262144);
    j = yarn_config();
    j["text_config"]["rope_parameters"].erase("factor");
    j["text_config"]["max_position_embeddings"] = 1048576;
    CHECK(ModelConfig::parse(j.dump(), "").yarn->factor == 4.0);
  }
  SECTION("attention_factor, mscale / mscale_all_dim, betas of 0, truncate") {
    json j = yarn_config();
    auto& r = j["text_config"]["rope_parameters"];
    r["mscale"] = 1.0;
    r["mscale_all_dim"] = 0.5;
    r["beta_fast"] = 0;
    r["beta_slow"] = nullptr;
    r["truncate"] = false;
    ModelConfig c2 = ModelConfig::parse(j.dump(), "");
    CHECK(c2.yarn->attention_factor == Approx((0.1 * std::log(4.0) + 1) / (0.05 * std::log(4.0) + 1)));
    CHECK(c2.yarn->beta_fast == 32);
    CHECK(c2.yarn->beta_slow == 1);
    CHECK_FALSE(c2.yarn->truncate);
    r["attention_factor"] = 1.25;
    CHECK(ModelConfig::parse(j.dump(), "").yarn->attention_factor == 1.25);
  }
  SECTION("the older rope_scaling beside top-level rope_theta") {
    json j = yarn_config();
    auto& t = j["text_config"];
    t.erase("rope_parameters");
    t["rope_theta"] = 1e6;
    t["partial_rotary_factor"] = 0.5;
    t["rope_scaling"] = {{"type", "yarn"}, {"factor", 2.0}, {"original_max_position_embeddings", 8192}};
    const ModelConfig c3 = ModelConfig::parse(j.dump(), "");
    REQUIRE(c3.yarn);
    CHECK(c3.rope_theta == 1e6);
    CHECK(c3.rotary_dim == 128);
    CHECK(c3.yarn->factor == 2.0);
    CHECK(c3.max_positions() == 262144);  // max_position_embeddings is more than 2 x 8192
  }
  SECTION("refusals name the key") {
    json j = yarn_config();
    j["text_config"]["rope_parameters"]["rope_type"] = "longrope";
    CHECK_THAT(parse_error(j), Contains("rope_type \"longrope\" is not supported"));
    j = yarn_config();
    j["text_config"]["rope_parameters"]["factor"] = 0.5;
    CHECK_THAT(parse_error(j), Contains("factor"));
    j = yarn_config();
    j["text_config"]["rope_parameters"]["original_max_position_embeddings"] = "many";
    CHECK_THAT(parse_error(j), Contains("original_max_position_embeddings"));
  }
}

TEST_CASE("yarn: frequencies and attention factor equal HF's formulas in float64", "[yarn]") {
  for (const double factor : {1.0, 1.5625, 2.5, 4.0}) {
    INFO("factor " << factor);
    const ModelConfig c = ModelConfig::parse(yarn_config(factor).dump(), "");
    const ds::kernels::RopeParams p = ds::qwen35::rope_params(c);
    const F64Yarn want = f64_yarn(1e7, 64, factor, 262144);
    check_close(p.inv_freq, want.inv_freq, 1e-6);  // f32 rounding
    CHECK(p.attention_scaling == Approx(want.attention).epsilon(1e-7));
    // YaRN keeps the fast dims and divides the slow ones by the factor.
    CHECK(p.inv_freq.front() == 1.0f);
    CHECK(p.inv_freq.back() == Approx(std::pow(1e7, -62.0 / 64) / factor).epsilon(1e-6));
    if (factor == 1.0) {
      // Factor 1 is the default RoPE: the same frequencies, no scaling.
      const std::vector<float> theta_freqs = ds::kernels::rope_frequencies(ds::kernels::RopeParams(64, 1e7));
      check_close(p.inv_freq, std::vector<double>(theta_freqs.begin(), theta_freqs.end()), 1e-7);
      CHECK(p.attention_scaling == 1.0f);
    }
  }
  // A small original context (the tiny fixture's: 64 positions, factor 4), betas and truncation.
  json j = yarn_config(4.0, 64);
  const F64Yarn small = f64_yarn(1e7, 64, 4.0, 64);
  check_close(ds::qwen35::rope_params(ModelConfig::parse(j.dump(), "")).inv_freq, small.inv_freq, 1e-6);
  j["text_config"]["rope_parameters"]["beta_fast"] = 8;
  j["text_config"]["rope_parameters"]["beta_slow"] = 0.5;
  j["text_config"]["rope_parameters"]["truncate"] = false;
  j["text_config"]["rope_parameters"]["rope_theta"] = 10000.0;
  check_close(ds::qwen35::rope_params(ModelConfig::parse(j.dump(), "")).inv_freq,
              f64_yarn(10000.0, 64, 4.0, 64, 8, 0.5, false).inv_freq, 1e-6);
}

TEST_CASE("hf-overrides: deep-merged into config.json, shadowed keys refused", "[yarn]") {
  json base = yarn_config();
  base["text_config"]["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}};
  const std::string over =
      R"({"text_config": {"rope_parameters": {"rope_type": "yarn", "factor": 2.0,
          "original_max_position_embeddings": 131072}, "max_position_embeddings": null}})";
  const ModelConfig c = ModelConfig::parse(base.dump(), "", "config.json", over);
  REQUIRE(c.yarn);
  CHECK(c.yarn->factor == 2.0);
  CHECK(c.rope_theta == 1e7);  // merged, not replaced
  CHECK(c.max_position_embeddings == 0);  // null removed it
  CHECK(c.max_positions() == 262144);
  CHECK_FALSE(ModelConfig::parse(base.dump(), "").yarn);
  // The text model reads text_config: a top-level rope_parameters would be shadowed.
  CHECK_THAT(parse_error(base, R"({"rope_parameters": {"rope_type": "yarn"}})"), Contains("text_config"));
  CHECK_THAT(parse_error(base, R"([1, 2])"), Contains("not a JSON object"));
  // A key only the top level has is fine.
  CHECK(ModelConfig::parse(base.dump(), "", "config.json", R"({"tie_word_embeddings": true})").tie_word_embeddings);
  const std::string merged = ModelConfig::merge_overrides(base.dump(), over);
  CHECK(json::parse(merged)["text_config"]["rope_parameters"]["factor"] == 2.0);
}
