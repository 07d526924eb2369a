// ModelConfig: both layouts, the layer schedule, stop ids, and refusals naming the key.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "model/qwen35/config.h"
#include "tests/model/st_writer.h"

using Catch::Matchers::Contains;
using ds::qwen35::LayerKind;
using ds::qwen35::ModelConfig;
namespace t = ds::test;

namespace {

nlohmann::json text_only() {
  // A 4B-shaped text-only config (sizes from the released Qwen3.5-4B), no layer_types.
  return {{"model_type", "qwen3_5_text"},
          {"vocab_size", 248320},
          {"hidden_size", 2560},
          {"intermediate_size", 9216},
          {"num_hidden_layers", 32},
          {"num_attention_heads", 16},
          {"num_key_value_heads", 4},
          {"head_dim", 256},
          {"rms_norm_eps", 1e-6},
          {"linear_num_key_heads", 16},
          {"linear_num_value_heads", 32},
          {"linear_key_head_dim", 128},
          {"linear_value_head_dim", 128},
          {"linear_conv_kernel_dim", 4},
          {"full_attention_interval", 4},
          {"tie_word_embeddings", true},
          {"eos_token_id", 248044},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}}}};
}

std::string parse_error(const nlohmann::json& j, const std::string& gen = "") {
  try {
    ModelConfig::parse(j.dump(), gen);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("config: the bundled multimodal config", "[config]") {
  const ModelConfig c = ModelConfig::load(t::tiny_dir());
  CHECK(c.multimodal_layout);
  CHECK(c.vocab_size == 1024);
  CHECK(c.hidden_size == 128);
  CHECK(c.intermediate_size == 384);
  CHECK(c.num_heads == 8);
  CHECK(c.num_kv_heads == 2);
  CHECK(c.head_dim == 256);
  CHECK(c.rotary_dim == 64);
  CHECK(c.rope_theta == 1e7);
  CHECK(c.deltanet_k_heads == 2);
  CHECK(c.deltanet_v_heads == 4);
  CHECK(c.conv_dim() == 2 * 2 * 128 + 4 * 128);
  CHECK(c.conv_kernel == 4);
  CHECK(c.eos_token_ids == std::vector<int32_t>{1006, 1004});  // generation_config wins over 1006 alone
  REQUIRE(c.layer_kinds.size() == 8);
  CHECK(c.layer_kinds[3] == LayerKind::full_attention);
  CHECK(c.layer_kinds[7] == LayerKind::full_attention);
  CHECK(c.layer_kinds[4] == LayerKind::deltanet);
  CHECK(c.kind_index == std::vector<int64_t>{0, 1, 2, 0, 3, 4, 5, 1});

  const auto g = c.cache_geometry();
  CHECK(g.n_attention_layers == 2);
  CHECK(g.n_kv_heads == 2);
  CHECK(g.head_dim == 256);
  CHECK(g.state.n_layers == 6);
  CHECK(g.state.conv_dim == 1024);
  CHECK(g.state.conv_taps == 3);
  CHECK(g.state.value_heads == 4);
  CHECK(g.state.key_dim == 128);
  CHECK(g.state.value_dim == 128);
  CHECK(g.kv_bytes_per_token() == 2 * 2 * 2 * 256 * 4);
}

TEST_CASE("config: text-only layout with full_attention_interval", "[config]") {
  const ModelConfig c = ModelConfig::parse(text_only().dump(), "");
  CHECK_FALSE(c.multimodal_layout);
  CHECK(c.num_full_layers() == 8);
  CHECK(c.num_deltanet_layers() == 24);
  for (int i = 0; i < 32; ++i)
    CHECK((c.layer_kinds[static_cast<size_t>(i)] == LayerKind::full_attention) == ((i + 1) % 4 == 0));
  CHECK(c.tie_word_embeddings);
  CHECK(c.eos_token_ids == std::vector<int32_t>{248044});
  CHECK(c.conv_dim() == 8192);
  CHECK(c.cache_geometry().kv_bytes_per_token() == 65536);  // spec table, 4B

  const ModelConfig g = ModelConfig::parse(text_only().dump(), R"({"eos_token_id": [248046, 248044]})");
  CHECK(g.eos_token_ids == std::vector<int32_t>{248046, 248044});
}

TEST_CASE("config: legacy top-level rope keys", "[config]") {
  auto j = text_only();
  j.erase("rope_parameters");
  j["rope_theta"] = 10000.0;
  j["partial_rotary_factor"] = 0.5;
  const ModelConfig c = ModelConfig::parse(j.dump(), "");
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.rotary_dim == 128);
}

TEST_CASE("config: what the forward pass cannot honour is refused by key", "[config]") {
  auto j = text_only();
  SECTION("missing size") {
    j.erase("head_dim");
    CHECK_THAT(parse_error(j), Contains("missing \"head_dim\""));
  }
  SECTION("non-integer size") {
    j["hidden_size"] = "big";
    CHECK_THAT(parse_error(j), Contains("\"hidden_size\" must be a positive integer"));
  }
  SECTION("GQA ratio") {
    j["num_key_value_heads"] = 3;
    CHECK_THAT(parse_error(j), Contains("not a multiple of num_key_value_heads"));
  }
  SECTION("DeltaNet head ratio") {
    j["linear_num_value_heads"] = 24;
    j["linear_num_key_heads"] = 16;
    CHECK_THAT(parse_error(j), Contains("linear_num_value_heads 24 is not a multiple"));
  }
  SECTION("no layer schedule") {
    j.erase("full_attention_interval");
    CHECK_THAT(parse_error(j), Contains("neither \"layer_types\" nor \"full_attention_interval\""));
  }
  SECTION("layer_types of the wrong length") {
    j["layer_types"] = {"linear_attention", "full_attention"};
    CHECK_THAT(parse_error(j), Contains("\"layer_types\" must list 32 layers"));
  }
  SECTION("unknown layer type") {
    j["num_hidden_layers"] = 2;
    j["layer_types"] = {"linear_attention", "sliding_attention"};
    CHECK_THAT(parse_error(j), Contains("unknown layer type \"sliding_attention\""));
  }
  SECTION("a RoPE scaling other than YaRN") {
    j["rope_parameters"]["rope_type"] = "llama3";
    CHECK_THAT(parse_error(j), Contains("rope_type \"llama3\" is not supported"));
    j["rope_parameters"]["rope_type"] = "default";
    j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
    CHECK_THAT(parse_error(j), Contains("rope_type \"linear\" is not supported"));
  }
  SECTION("odd rotary dim") {
    j["rope_parameters"]["partial_rotary_factor"] = 0.01171875;  // 256 * f = 3
    CHECK_THAT(parse_error(j), Contains("must be positive and even"));
  }
  SECTION("another activation") {
    j["hidden_act"] = "gelu";
    CHECK_THAT(parse_error(j), Contains("\"hidden_act\" \"gelu\" is not supported"));
  }
  SECTION("MoE model") {
    j["model_type"] = "qwen3_5_moe";
    CHECK_THAT(parse_error(j), Contains("model_type qwen3_5_moe is not a dense Qwen3.5/3.6 model"));
  }
  SECTION("eos outside the vocabulary") {
    CHECK_THAT(parse_error(j, R"({"eos_token_id": [300000]})"), Contains("eos token id 300000"));
  }
  SECTION("not JSON") {
    try {
      ModelConfig::parse("{", "");
      FAIL("no error");
    } catch (const std::runtime_error& e) {
      CHECK_THAT(e.what(), Contains("config.json: not valid JSON"));
    }
  }
}
