// Checkpoint loading: both layouts, shards, tied embeddings, mixed stored types, and every
// way a checkpoint can be wrong (missing, extra, mis-shaped, mistyped tensors, bad index).
#include <catch2/catch.hpp>

#include <functional>
#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "model/qwen35/checkpoint.h"
#include "model/qwen35/model.h"
#include "tests/model/harness.h"
#include "tests/model/st_writer.h"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;
namespace t = ds::test;

namespace {

const std::vector<int32_t> kPrompt = {17, 512, 1005, 3, 1023, 640, 88};

std::vector<float> logits_of(const fs::path& dir) {
  t::Harness h(dir);
  return h.prefill(h.add_sequence(), kPrompt);
}

const std::vector<float>& reference_logits() {
  static const std::vector<float> l = logits_of(t::tiny_dir());
  return l;
}

t::StTensors tiny_tensors() { return t::read_safetensors(t::tiny_dir() / "model.safetensors"); }

// The tiny checkpoint with its tensors passed through edit, into dir.
void write_tiny(const fs::path& dir, const std::function<void(t::StTensors&)>& edit = {}) {
  t::copy_tiny_configs(dir);
  t::StTensors ts = tiny_tensors();
  if (edit) edit(ts);
  t::write_safetensors(dir / "model.safetensors", ts);
}

void edit_config(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(t::read_text(dir / "config.json"));
  edit(j);
  t::write_text(dir / "config.json", j.dump(2));
}

std::string load_error(const fs::path& dir) {
  auto be = ds::kernels::cpu::make_cpu_backend();
  try {
    ds::qwen35::Model::load(*be, dir);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

const std::string kP = "model.language_model.";

}  // namespace

TEST_CASE("loading: the released multimodal layout, vision tensors skipped", "[loading]") {
  auto be = ds::kernels::cpu::make_cpu_backend();
  auto m = ds::qwen35::Model::load(*be, t::tiny_dir());
  const auto& c = m->config();
  CHECK(c.multimodal_layout);
  CHECK(c.hidden_size == 128);
  CHECK(c.num_layers == 8);
  CHECK(c.num_full_layers() == 2);
  CHECK(c.vocab_size == 1024);
  CHECK(c.eos_token_ids == std::vector<int32_t>{1006, 1004});
  CHECK_FALSE(c.tie_word_embeddings);
  // Every logit is finite and the rows differ: real weights went through.
  const auto& l = reference_logits();
  REQUIRE(l.size() == kPrompt.size() * 1024);
  for (float x : l) REQUIRE(std::isfinite(x));
  CHECK(l[0] != l[1024]);
}

TEST_CASE("loading: the text-only layout gives the same logits", "[loading]") {
  t::TempDir dir;
  t::copy_tiny_configs(dir.path());
  edit_config(dir.path(), [](nlohmann::json& j) {
    nlohmann::json text = j["text_config"];
    text["model_type"] = "qwen3_5_text";
    text["architectures"] = {"Qwen3_5ForCausalLM"};
    text["tie_word_embeddings"] = false;
    j = text;
  });
  t::StTensors out;
  for (auto& [name, tensor] : tiny_tensors()) {
    if (name.rfind("model.visual.", 0) == 0) continue;
    std::string renamed = name;
    if (name.rfind(kP, 0) == 0) renamed = "model." + name.substr(kP.size());
    out[renamed] = tensor;
  }
  REQUIRE(out.count("model.layers.3.self_attn.q_proj.weight"));
  t::write_safetensors(dir / "model.safetensors", out);
  auto be = ds::kernels::cpu::make_cpu_backend();
  CHECK_FALSE(ds::qwen35::Model::load(*be, dir.path())->config().multimodal_layout);
  CHECK(logits_of(dir.path()) == reference_logits());
}

TEST_CASE("loading: a sharded checkpoint with an index gives the same logits", "[loading]") {
  t::TempDir dir;
  t::copy_tiny_configs(dir.path());
  std::vector<t::StTensors> shards(3);
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  int i = 0;
  for (auto& [name, tensor] : tiny_tensors()) {
    const int s = i++ % 3;
    shards[static_cast<size_t>(s)][name] = tensor;
    index["weight_map"][name] = "model-0000" + std::to_string(s + 1) + "-of-00003.safetensors";
  }
  for (int s = 0; s < 3; ++s)
    t::write_safetensors(dir / ("model-0000" + std::to_string(s + 1) + "-of-00003.safetensors"),
                         shards[static_cast<size_t>(s)]);
  t::write_text(dir / "model.safetensors.index.json", index.dump(2));
  const ds::qwen35::Checkpoint ckpt(dir.path());
  CHECK(ckpt.file_names().size() == 3);
  CHECK(logits_of(dir.path()) == reference_logits());

  SECTION("an index entry whose shard lacks the tensor") {
    index["weight_map"]["lm_head.weight"] = "model-00001-of-00003.safetensors";
    index["weight_map"][kP + "norm.weight"] = "model-00003-of-00003.safetensors";
    t::write_text(dir / "model.safetensors.index.json", index.dump(2));
    const std::string e = load_error(dir.path());
    CHECK_THAT(e, Contains("model-0000") && Contains("is listed in model.safetensors.index.json but not in this shard"));
  }
  SECTION("a shard tensor the index does not list") {
    index["weight_map"].erase(kP + "norm.weight");
    t::write_text(dir / "model.safetensors.index.json", index.dump(2));
    CHECK_THAT(load_error(dir.path()), Contains("tensor " + kP + "norm.weight is not listed"));
  }
  SECTION("a shard name outside the directory") {
    index["weight_map"][kP + "norm.weight"] = "../elsewhere.safetensors";
    t::write_text(dir / "model.safetensors.index.json", index.dump(2));
    CHECK_THAT(load_error(dir.path()), Contains("outside the checkpoint directory"));
  }
  SECTION("a missing shard file") {
    fs::remove(dir / "model-00002-of-00003.safetensors");
    CHECK_THAT(load_error(dir.path()), Contains("model-00002-of-00003.safetensors") && Contains("cannot open"));
  }
  SECTION("a truncated shard") {
    const std::string s = t::read_text(dir / "model-00002-of-00003.safetensors");
    t::write_text(dir / "model-00002-of-00003.safetensors", s.substr(0, s.size() - 100));
    CHECK_THAT(load_error(dir.path()), Contains("model-00002-of-00003.safetensors") && Contains("truncated"));
  }
  SECTION("an index that is not JSON") {
    t::write_text(dir / "model.safetensors.index.json", "{\"weight_map\": ");
    CHECK_THAT(load_error(dir.path()), Contains("model.safetensors.index.json: not valid JSON"));
  }
}

TEST_CASE("loading: tied embeddings reuse embed_tokens as lm_head", "[loading]") {
  t::TempDir tied, untied;
  write_tiny(tied.path(), [](t::StTensors& ts) { ts.erase("lm_head.weight"); });
  edit_config(tied.path(), [](nlohmann::json& j) {
    j["tie_word_embeddings"] = true;
    j["text_config"]["tie_word_embeddings"] = true;
  });
  // The same model spelled out: lm_head holds a copy of the embedding.
  write_tiny(untied.path(), [](t::StTensors& ts) { ts["lm_head.weight"] = ts.at(kP + "embed_tokens.weight"); });
  const auto a = logits_of(tied.path());
  CHECK(a == logits_of(untied.path()));
  CHECK(a != reference_logits());

  SECTION("untied without lm_head.weight is a missing tensor") {
    edit_config(tied.path(), [](nlohmann::json& j) {
      j["tie_word_embeddings"] = false;
      j["text_config"]["tie_word_embeddings"] = false;
    });
    CHECK_THAT(load_error(tied.path()), Contains("tensor lm_head.weight is missing"));
  }
}

TEST_CASE("loading: f32 and f16 tensors load to the same values as bf16", "[loading]") {
  t::TempDir dir;
  write_tiny(dir.path(), [](t::StTensors& ts) {
    for (auto& [name, tensor] : ts) {
      // Qwen3.5 stores these two in f32.
      if (name.find("linear_attn.A_log") != std::string::npos || name.find("linear_attn.norm.weight") != std::string::npos)
        tensor = t::bf16_to(tensor, "F32");
      if (name.find("mlp.up_proj") != std::string::npos) tensor = t::bf16_to(tensor, "F32");  // mixed with a bf16 gate
      if (name.find("input_layernorm") != std::string::npos) tensor = t::bf16_to(tensor, "F16");
    }
    ts["mtp.fc.weight"] = {"BF16", {4, 4}, std::vector<uint8_t>(32, 0)};  // skipped like HF
  });
  CHECK(logits_of(dir.path()) == reference_logits());
}

TEST_CASE("loading: a wrong checkpoint names the file and the tensor", "[loading]") {
  t::TempDir dir;
  const std::string q = kP + "layers.3.self_attn.q_proj.weight";
  SECTION("missing tensor") {
    write_tiny(dir.path(), [](t::StTensors& ts) { ts.erase(kP + "layers.3.self_attn.k_norm.weight"); });
    CHECK_THAT(load_error(dir.path()),
               Contains("tensor " + kP + "layers.3.self_attn.k_norm.weight is missing") && Contains("model.safetensors"));
  }
  SECTION("extra tensor") {
    write_tiny(dir.path(), [](t::StTensors& ts) { ts[kP + "layers.0.mlp.bias"] = {"BF16", {128}, std::vector<uint8_t>(256, 0)}; });
    CHECK_THAT(load_error(dir.path()),
               Contains("model.safetensors: unexpected tensor " + kP + "layers.0.mlp.bias"));
  }
  SECTION("a layer the config does not have") {
    write_tiny(dir.path(), [](t::StTensors& ts) { ts[kP + "layers.8.input_layernorm.weight"] = ts.at(kP + "layers.0.input_layernorm.weight"); });
    CHECK_THAT(load_error(dir.path()), Contains("unexpected tensor " + kP + "layers.8.input_layernorm.weight"));
  }
  SECTION("mis-shaped tensor") {
    write_tiny(dir.path(), [&](t::StTensors& ts) { ts[q].shape = {2048, 256}; });
    CHECK_THAT(load_error(dir.path()), Contains("model.safetensors: tensor " + q + " has shape [2048, 256], expected [4096, 128]"));
  }
  SECTION("mis-shaped conv1d (2-D instead of [C, 1, Kc])") {
    const std::string c = kP + "layers.0.linear_attn.conv1d.weight";
    write_tiny(dir.path(), [&](t::StTensors& ts) { ts[c].shape = {1024, 4}; });
    CHECK_THAT(load_error(dir.path()), Contains(c + " has shape [1024, 4], expected [1024, 1, 4]"));
  }
  SECTION("wrong dtype") {
    const std::string n = kP + "norm.weight";
    write_tiny(dir.path(), [&](t::StTensors& ts) { ts[n] = {"I16", {128}, ts.at(n).bytes}; });
    CHECK_THAT(load_error(dir.path()), Contains("tensor " + n + " has dtype I16, expected F32, BF16 or F16"));
  }
  SECTION("config that disagrees with the weights") {
    write_tiny(dir.path());
    edit_config(dir.path(), [](nlohmann::json& j) { j["text_config"]["intermediate_size"] = 512; });
    CHECK_THAT(load_error(dir.path()), Contains("mlp.gate_proj.weight has shape [384, 128], expected [512, 128]"));
  }
  SECTION("no weights at all") {
    t::copy_tiny_configs(dir.path());
    CHECK_THAT(load_error(dir.path()), Contains("no model.safetensors or model.safetensors.index.json"));
  }
  SECTION("not a directory") {
    CHECK_THAT(load_error(dir / "nowhere"), Contains("nowhere"));
  }
}
