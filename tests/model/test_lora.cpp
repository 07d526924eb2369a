// LoRA adapters on the model: PEFT files read and refused as lora_adapter.h says, the slot
// pool's layout (lora_slots.h: one stacked A per group of projections that read one input), and
// the forward with adapters in slots against the oracle, a checkpoint with the adapter merged into
// its weights (W + scale * B A in f32) run by the plain model -- in mixed batches of two
// adapters and the base, prefill in chunks and decode, split in_proj_q/k/v pieces, rsLoRA,
// text-only keys.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstring>
#include <random>

#include "model/qwen35/lora_adapter.h"
#include "model/qwen35/lora_config.h"
#include "model/qwen35/lora_slots.h"
#include "tests/model/harness.h"
#include "tests/model/lora_fixture.h"

using namespace ds;
using ds::test::LoraSpec;

namespace {

qwen35::ModelConfig tiny_config() { return qwen35::ModelConfig::load(test::tiny_dir()); }

std::vector<int32_t> prompt(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(1, 1023);
  std::vector<int32_t> p(n);
  for (auto& t : p) t = d(rng);
  return p;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// Logits of a prefill (whole) then `decodes` greedy decode steps on a model, one sequence.
std::vector<float> run_alone(test::Harness& h, const std::vector<int32_t>& p, int decodes, int32_t lora_slot = -1) {
  auto& s = h.add_sequence();
  std::vector<float> out = h.step({{&s, p, 1, lora_slot}});
  std::vector<float> all = out;
  for (int i = 0; i < decodes; ++i) {
    const auto best = static_cast<int32_t>(std::max_element(out.end() - 1024, out.end()) - (out.end() - 1024));
    out = h.step({{&s, {best}, 1, lora_slot}});
    all.insert(all.end(), out.begin(), out.end());
  }
  h.finish(s);
  return all;
}

std::string load_error(const std::filesystem::path& dir, int64_t max_rank = 16) {
  try {
    qwen35::load_lora_adapter(dir, tiny_config(), {.max_rank = max_rank});
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("adapter_config.json is read as PEFT writes it, and what cannot be applied is refused", "[lora]") {
  LoraSpec spec;
  spec.rank = 8;
  spec.alpha = 16;
  auto c = qwen35::LoraConfig::parse(test::lora_config_json(spec));
  CHECK(c.rank == 8);
  CHECK(c.scale() == Approx(2.0));
  spec.rslora = true;
  c = qwen35::LoraConfig::parse(test::lora_config_json(spec));
  CHECK(c.scale() == Approx(16.0 / std::sqrt(8.0)));
  CHECK(c.target_modules.size() == spec.targets.size());
  auto refused = [](const std::string& text, const std::string& want) {
    try {
      qwen35::LoraConfig::parse(text);
    } catch (const std::runtime_error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(want) != std::string::npos);
      return;
    }
    FAIL("accepted: " << text);
  };
  refused(R"({"r": 0, "lora_alpha": 8})", "\"r\"");
  refused(R"({"r": 4, "lora_alpha": -1})", "lora_alpha");
  refused(R"({"r": 4, "use_dora": true})", "DoRA");
  refused(R"({"r": 4, "bias": "all"})", "bias");
  refused(R"({"r": 4, "modules_to_save": ["lm_head"]})", "modules_to_save");
  refused(R"({"r": 4, "rank_pattern": {"q_proj": 8}})", "rank_pattern");
  refused(R"({"peft_type": "IA3", "r": 4})", "peft_type");
  refused("[1, 2]", "object");
  refused("{\"r\": 4", "JSON");
  refused(std::string(100, '[') + std::string(100, ']'), "deeper");
  refused(R"({"r": 4, "target_modules": [1]})", "target_modules");
}

TEST_CASE("adapter files that do not fit the model are refused naming file and tensor", "[lora]") {
  test::TempDir tmp;
  const auto dir = tmp / "a";
  LoraSpec spec;
  test::write_random_lora(dir, spec);
  CHECK(load_error(dir).empty());
  const size_t plain_modules = qwen35::load_lora_adapter(dir, tiny_config(), {.max_rank = 16}).modules.size();
  // Rank above --max-lora-rank.
  CHECK(load_error(dir, 2).find("--max-lora-rank") != std::string::npos);

  auto with_tensors = [&](const std::function<void(test::StTensors&)>& edit) {
    test::StTensors t = test::random_lora_tensors(spec);
    edit(t);
    test::write_safetensors(dir / "adapter_model.safetensors", t);
    return load_error(dir);
  };
  const std::string q = "base_model.model.model.language_model.layers.3.self_attn.q_proj.";
  std::string e = with_tensors([&](test::StTensors& t) { t[q + "lora_B.weight"].shape = {4096, 2};
    t[q + "lora_B.weight"].bytes.resize(4096 * 2 * 4); });
  CHECK(e.find("adapter_model.safetensors") != std::string::npos);
  CHECK(e.find(q + "lora_B.weight") != std::string::npos);
  e = with_tensors([&](test::StTensors& t) { t.erase(q + "lora_B.weight"); });
  CHECK(e.find("without its partner") != std::string::npos);
  e = with_tensors([&](test::StTensors& t) { t["base_model.model.lm_head.lora_A.weight"] = t[q + "lora_A.weight"]; });
  CHECK(e.find("lm_head") != std::string::npos);
  // The vision tower's tensors are left out (as vLLM does), an adapter of the tower alone refused.
  e = with_tensors([&](test::StTensors& t) {
    t["base_model.model.model.visual.blocks.0.attn.qkv.lora_A.weight"] = t[q + "lora_A.weight"];
    t["base_model.model.model.visual.blocks.0.attn.qkv.lora_B.weight"] = t[q + "lora_B.weight"];
  });
  CHECK(e.empty());
  {
    const auto ad = qwen35::load_lora_adapter(dir, tiny_config(), {.max_rank = 16});
    CHECK(ad.ignored_tower_tensors == 2);
    CHECK(ad.ignored().find("2 tensors of the vision tower") != std::string::npos);
    CHECK(ad.modules.size() == plain_modules);
  }
  e = with_tensors([&](test::StTensors& t) {
    const test::StTensor a = t[q + "lora_A.weight"];
    t.clear();
    t["base_model.model.model.visual.blocks.0.attn.qkv.lora_A.weight"] = a;
  });
  CHECK(e.find("vision tower only") != std::string::npos);
  e = with_tensors([&](test::StTensors& t) {
    t["base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight"] = t[q + "lora_A.weight"];
    t["base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_B.weight"] = t[q + "lora_B.weight"];
  });
  CHECK(e.find("DeltaNet layer") != std::string::npos);
  e = with_tensors([&](test::StTensors& t) {
    t["base_model.model.model.language_model.layers.0.linear_attn.conv1d.lora_A.weight"] = t[q + "lora_A.weight"];
  });
  CHECK(e.find("cannot be applied") != std::string::npos);
  e = with_tensors([&](test::StTensors& t) {
    t[q + "lora_magnitude_vector"] = t[q + "lora_A.weight"];
  });
  CHECK(e.find("DoRA") != std::string::npos);
  e = with_tensors([&](test::StTensors& t) { t[q + "lora_A.weight"] = test::bf16_to(
      test::StTensor{"BF16", {4, 128}, std::vector<uint8_t>(4 * 128 * 2, 0)}, "F32");
      t[q + "lora_A.weight"].dtype = "I32"; });
  CHECK(e.find("F32, BF16 or F16") != std::string::npos);
  // target_modules naming a module we cannot apply; the tower's names (PEFT's "all-linear") pass.
  test::write_safetensors(dir / "adapter_model.safetensors", test::random_lora_tensors(spec));
  test::write_text(dir / "adapter_config.json", R"({"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "lm_head"]})");
  CHECK(load_error(dir).find("lm_head") != std::string::npos);
  test::write_text(dir / "adapter_config.json",
                   R"({"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "qkv", "linear_fc1", "proj"]})");
  CHECK(load_error(dir).empty());
  CHECK(qwen35::load_lora_adapter(dir, tiny_config(), {.max_rank = 16}).ignored().find("qkv, linear_fc1, proj") !=
        std::string::npos);
  CHECK(load_error(tmp / "missing").find("not a directory") != std::string::npos);
}

TEST_CASE("split in_proj_q/k/v adapters map onto the fused rows", "[lora]") {
  LoraSpec spec;
  spec.split_qkv = true;
  test::TempDir tmp;
  test::write_random_lora(tmp / "a", spec);
  const auto ad = qwen35::load_lora_adapter(tmp / "a", tiny_config(), {.max_rank = 4});
  const auto it = std::find_if(ad.modules.begin(), ad.modules.end(), [](const qwen35::LoraModule& m) {
    return m.target == qwen35::LoraTarget::in_proj_qkv;
  });
  REQUIRE(it != ad.modules.end());
  CHECK(it->rank == 12);  // three pieces of rank 4
  // B is block-diagonal: the q rows read only the first 4 rank columns.
  for (int64_t r = 4; r < 12; ++r) CHECK(it->b[static_cast<size_t>(r)] == 0.0f);
}

TEST_CASE("the slot pool stacks the A of the projections that read one input, in no more memory", "[lora]") {
  const auto cfg = tiny_config();
  auto be = kernels::cpu::make_cpu_backend({.num_threads = 1});
  const int32_t S = 2;
  const int64_t r = 4;
  qwen35::LoraSlots pool(*be, cfg, S, r);
  // An A and a B per site, as when every site had its own A pool.
  int64_t want_bytes = 0;
  for (int64_t l = 0; l < cfg.num_layers; ++l)
    for (int t = 0; t < qwen35::kNumLoraTargets; ++t)
      if (pool.site(l, static_cast<qwen35::LoraTarget>(t))) {
        const auto sh = qwen35::lora_target_shape(cfg, static_cast<qwen35::LoraTarget>(t));
        want_bytes += S * (sh.in + sh.out) * r * sh.rank_factor * 4;
      }
  CHECK(pool.bytes() == want_bytes);
  CHECK(pool.max_group_rank() == 6 * r);  // in_proj_qkv (split pieces: 3r), z, b, a

  // Layer 3 is full attention, layer 0 DeltaNet (the tiny config's layer_types).
  using T = qwen35::LoraTarget;
  auto placed = [&](int64_t layer, std::initializer_list<T> members, int64_t in) {
    const int32_t group = pool.site(layer, *members.begin())->group;
    int64_t offset = 0;
    for (T t : members) {
      INFO("layer " << layer << " " << qwen35::lora_target_name(t));
      const auto* s = pool.site(layer, t);
      REQUIRE(s);
      CHECK(s->group == group);
      CHECK(s->rank_offset == offset);
      offset += s->rank;
    }
    CHECK((pool.group(*pool.site(layer, *members.begin())).a.shape() == kernels::Shape{S, offset, in}));
  };
  const int64_t H = cfg.hidden_size;
  placed(3, {T::q_proj, T::k_proj, T::v_proj}, H);
  placed(3, {T::o_proj}, cfg.num_heads * cfg.head_dim);
  placed(0, {T::in_proj_qkv, T::in_proj_z, T::in_proj_b, T::in_proj_a}, H);
  placed(0, {T::out_proj}, cfg.deltanet_value_dim());
  placed(0, {T::gate_proj, T::up_proj}, H);
  placed(3, {T::down_proj}, cfg.intermediate_size);
  CHECK(pool.site(3, T::q_proj)->group != pool.site(3, T::o_proj)->group);
  CHECK(pool.site(0, T::q_proj) == nullptr);

  // An adapter of rank 2 on some members of each group: its A rows at the members' offsets
  // of slot 1, everything else of both slots zero; clear() zeroes them again.
  test::TempDir tmp;
  LoraSpec spec;
  spec.rank = 2;
  spec.targets = {"k_proj", "v_proj", "in_proj_z", "in_proj_a", "up_proj", "down_proj"};
  test::write_random_lora(tmp / "a", spec);
  const auto ad = qwen35::load_lora_adapter(tmp / "a", cfg, {.max_rank = r});
  pool.install(1, ad);
  auto check_groups = [&](bool installed) {
    for (int64_t l = 0; l < cfg.num_layers; ++l)
      for (int t = 0; t < qwen35::kNumLoraTargets; ++t) {
        const auto* s = pool.site(l, static_cast<T>(t));
        if (!s || s->rank_offset != 0) continue;  // each group once, by its first member
        const kernels::Tensor& a = pool.group(*s).a;
        const int64_t rg = a.dim(1), in = a.dim(2);
        std::vector<float> want(static_cast<size_t>(a.numel()), 0.0f), got(want.size());
        if (installed)
          for (const auto& m : ad.modules) {
            const auto* ms = pool.site(m.layer, m.target);
            if (ms->group != s->group) continue;
            std::copy(m.a.begin(), m.a.end(), want.begin() + (rg + ms->rank_offset) * in);  // slot 1
          }
        be->copy_to_host(a, got);
        INFO("layer " << l << ", the group of " << qwen35::lora_target_name(static_cast<T>(t)));
        CHECK(got == want);
      }
  };
  check_groups(true);
  CHECK(pool.site(3, T::k_proj)->used == std::vector<bool>{false, true});
  CHECK(pool.site(3, T::q_proj)->used == std::vector<bool>{false, false});
  pool.clear(1);
  check_groups(false);
}

TEST_CASE("a mixed batch of two adapters and the base equals the merged checkpoints", "[lora]") {
  test::TempDir tmp;
  LoraSpec a;  // every target
  LoraSpec b;
  b.seed = 2;
  b.rank = 2;
  b.alpha = 3;
  b.rslora = true;
  b.split_qkv = true;
  b.text_only_keys = true;
  b.targets = {"q_proj", "v_proj", "in_proj_qkv", "in_proj_b", "down_proj"};
  test::write_random_lora(tmp / "a", a);
  test::write_random_lora(tmp / "b", b);
  test::write_merged_checkpoint(tmp / "merged_a", a);
  test::write_merged_checkpoint(tmp / "merged_b", b);

  test::Harness h(test::tiny_dir(), 256, 4, 8);
  h.model().enable_lora(3, 4);
  const auto cfg = tiny_config();
  h.model().install_lora(0, qwen35::load_lora_adapter(tmp / "a", cfg, {.max_rank = 4}));
  h.model().install_lora(2, qwen35::load_lora_adapter(tmp / "b", cfg, {.max_rank = 4}));
  test::Harness ma(tmp / "merged_a", 64, 4, 2), mb(tmp / "merged_b", 64, 4, 2), base(test::tiny_dir(), 64, 4, 2);

  const auto pa = prompt(1, 11), pb = prompt(2, 7), pc = prompt(3, 9);
  const auto want_a = run_alone(ma, pa, 4), want_b = run_alone(mb, pb, 4), want_c = run_alone(base, pc, 4);
  // The adapters do change the output (a test that could not fail otherwise).
  CHECK(max_abs_diff(run_alone(base, pa, 4), want_a) > 0.05);
  CHECK(max_abs_diff(run_alone(base, pb, 4), want_b) > 0.01);

  SECTION("alone") {
    CHECK(max_abs_diff(run_alone(h, pa, 4, 0), want_a) < 2e-4);
    CHECK(max_abs_diff(run_alone(h, pb, 4, 2), want_b) < 2e-4);
    CHECK(max_abs_diff(run_alone(h, pc, 4), want_c) < 1e-5);  // the base path is untouched
  }
  SECTION("together, prefilled in chunks then decoding in one batch") {
    auto& sa = h.add_sequence();
    auto& sb = h.add_sequence();
    auto& sc = h.add_sequence();
    std::vector<float> la, lb, lc;
    auto cut = [](const std::vector<int32_t>& p, size_t from, size_t n) {
      return std::vector<int32_t>(p.begin() + static_cast<long>(from), p.begin() + static_cast<long>(std::min(p.size(), from + n)));
    };
    // Chunks of 4 from each prompt in every step, the sampling rows once a prompt ends.
    for (size_t pos = 0; pos < 12; pos += 4) {
      std::vector<test::Harness::Part> parts;
      std::vector<int> who;
      if (pos < pa.size()) { parts.push_back({&sa, cut(pa, pos, 4), pos + 4 >= pa.size() ? 1 : 0, 0}); who.push_back(0); }
      if (pos < pb.size()) { parts.push_back({&sb, cut(pb, pos, 4), pos + 4 >= pb.size() ? 1 : 0, 2}); who.push_back(1); }
      if (pos < pc.size()) { parts.push_back({&sc, cut(pc, pos, 4), pos + 4 >= pc.size() ? 1 : 0, -1}); who.push_back(2); }
      const auto out = h.step(parts);
      size_t row = 0;
      for (size_t i = 0; i < parts.size(); ++i) {
        if (!parts[i].logit_rows) continue;
        std::vector<float>& dst = who[i] == 0 ? la : who[i] == 1 ? lb : lc;
        dst.assign(out.begin() + static_cast<long>(row * 1024), out.begin() + static_cast<long>((row + 1) * 1024));
        ++row;
      }
    }
    std::vector<float> all_a = la, all_b = lb, all_c = lc;
    auto argmax = [](const std::vector<float>& l) {
      return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    };
    for (int d = 0; d < 4; ++d) {
      const auto out = h.step({{&sa, {argmax(la)}, 1, 0}, {&sc, {argmax(lc)}, 1, -1}, {&sb, {argmax(lb)}, 1, 2}});
      la.assign(out.begin(), out.begin() + 1024);
      lc.assign(out.begin() + 1024, out.begin() + 2048);
      lb.assign(out.begin() + 2048, out.end());
      all_a.insert(all_a.end(), la.begin(), la.end());
      all_b.insert(all_b.end(), lb.begin(), lb.end());
      all_c.insert(all_c.end(), lc.begin(), lc.end());
    }
    CHECK(max_abs_diff(all_a, want_a) < 2e-4);
    CHECK(max_abs_diff(all_b, want_b) < 2e-4);
    CHECK(max_abs_diff(all_c, want_c) < 2e-4);
  }
  SECTION("a slot reloaded with another adapter, and cleared") {
    h.model().install_lora(0, qwen35::load_lora_adapter(tmp / "b", cfg, {.max_rank = 4}));
    CHECK(max_abs_diff(run_alone(h, pb, 4, 0), want_b) < 2e-4);
    h.model().clear_lora(0);
    CHECK(max_abs_diff(run_alone(h, pc, 4, 0), want_c) < 1e-5);
  }
  SECTION("slots outside the pool are refused before anything runs") {
    auto& s = h.add_sequence();
    CHECK_THROWS_AS(h.step({{&s, pa, 1, 3}}), std::invalid_argument);
  }
}

TEST_CASE("the fused projection path applies adapters too", "[lora]") {
  // A backend that computes the stacked projections as one GEMM (what a GPU does for small steps).
  test::TempDir tmp;
  LoraSpec a;
  test::write_random_lora(tmp / "a", a);
  test::write_merged_checkpoint(tmp / "merged_a", a);
  test::Harness h(test::tiny_dir(), 64, 4, 2, {}, {.fused_projection_rows = 64});
  h.model().enable_lora(1, 4);
  h.model().install_lora(0, qwen35::load_lora_adapter(tmp / "a", tiny_config(), {.max_rank = 4}));
  test::Harness ma(tmp / "merged_a", 64, 4, 2);
  const auto p = prompt(5, 6);
  CHECK(max_abs_diff(run_alone(h, p, 3, 0), run_alone(ma, p, 3)) < 2e-4);
}
