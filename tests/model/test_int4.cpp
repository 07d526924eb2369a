// INT4 checkpoints (GPTQ, AWQ; model/qwen35/int4.h): the bundled tiny checkpoint re-written
// in each layout by a packer written here from the formats' definitions (round to nearest per
// group, f16 scales; GPTQ's qweight packed along the input and qzeros along the output, v1's
// "zero minus one" or v2's zero; AWQ's interleaved nibble order), next to a twin holding the
// dequantised values in F32. The loader must give the twin's weights exactly, so the logits
// must be equal; also where the backend keeps the 4-bit form (the CPU's int4_weights, which
// widens at upload: the path a GPU's loading takes). Then the config keys and tensor layouts
// the loader refuses, and --quantization against what the checkpoint is.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "kernels/common/half.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/qwen35/model.h"
#include "tests/model/harness.h"
#include "tests/model/mtp_checkpoint.h"
#include "tests/model/st_writer.h"
#include "tests/test_paths.h"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;
namespace t = ds::test;
namespace q = ds::qwen35;

namespace {

const std::string kP = "model.language_model.";
const std::vector<int32_t> kPrompt = {17, 512, 1005, 3, 1023, 640, 88, 5, 900};

struct Layout {
  std::string method = "gptq";  // or "awq"
  int64_t group_size = 128;     // -1: the whole input
  bool desc_act = false;
  bool sym = true;
  std::string format = "gptq";  // GPTQ's checkpoint_format: gptq (v1) or gptq_v2
  // Which weights are quantised (default: the linear layers Qwen's quantised releases
  // quantise, as the FP8 ones; not in_proj_a/b).
  std::function<bool(const std::string&)> quantised = nullptr;
};

bool linear_target(const std::string& name) {
  if (name.rfind("model.visual.", 0) == 0) return false;
  for (const char* m : {"q_proj.", "k_proj.", "v_proj.", "o_proj.", "gate_proj.", "up_proj.", "down_proj.",
                        "in_proj_qkv.", "in_proj_z.", "out_proj."})
    if (name.find(m) != std::string::npos) return true;
  return false;
}

// Only the MLPs' projections (Qwen3.5-27B-GPTQ-Int4's choice, as third-party loaders of it
// describe the release).
bool mlp_target(const std::string& name) {
  return linear_target(name) && name.find(".mlp.") != std::string::npos;
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

// One weight W [N, K] quantised: codes q[k][n], f16 scales and integer zeros per (group, n),
// the group of each input, and the dequantised values [N, K].
struct Quantised {
  std::vector<int> q, zero;
  std::vector<uint16_t> scale;
  std::vector<int32_t> g_idx;
  std::vector<float> values;
};

Quantised quantise(const std::vector<float>& w, int64_t N, int64_t K, const Layout& L, std::mt19937& rng) {
  const int64_t G = L.group_size == -1 ? K : L.group_size, groups = K / G;
  Quantised r;
  r.g_idx.resize(static_cast<size_t>(K));
  std::vector<int32_t> order(static_cast<size_t>(K));
  std::iota(order.begin(), order.end(), 0);
  if (L.desc_act) std::shuffle(order.begin(), order.end(), rng);
  for (int64_t i = 0; i < K; ++i) r.g_idx[static_cast<size_t>(order[static_cast<size_t>(i)])] = static_cast<int32_t>(i / G);
  const bool sym = L.method == "gptq" && L.sym;
  r.q.assign(static_cast<size_t>(K * N), 0);
  r.zero.assign(static_cast<size_t>(groups * N), 0);
  r.scale.assign(static_cast<size_t>(groups * N), 0);
  r.values.assign(static_cast<size_t>(N * K), 0.0f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      float lo = 0, hi = 0;
      for (int64_t k = 0; k < K; ++k)
        if (r.g_idx[static_cast<size_t>(k)] == g) {
          lo = std::min(lo, w[static_cast<size_t>(n * K + k)]);
          hi = std::max(hi, w[static_cast<size_t>(n * K + k)]);
        }
      if (sym) hi = std::max(hi, -lo), lo = -hi;
      const float s = hi > lo ? (hi - lo) / 15.0f : 1.0f;
      const uint16_t s16 = ds::f32_to_f16(s);
      const float sf = ds::f16_to_f32(s16);
      const int z = sym ? 8 : std::clamp(static_cast<int>(std::lround(-lo / sf)), 0, 15);
      r.scale[static_cast<size_t>(g * N + n)] = s16;
      r.zero[static_cast<size_t>(g * N + n)] = z;
      for (int64_t k = 0; k < K; ++k)
        if (r.g_idx[static_cast<size_t>(k)] == g) {
          const int code = std::clamp(static_cast<int>(std::nearbyint(w[static_cast<size_t>(n * K + k)] / sf)) + z, 0, 15);
          r.q[static_cast<size_t>(k * N + n)] = code;
          r.values[static_cast<size_t>(n * K + k)] = sf * static_cast<float>(code - z);
        }
    }
  return r;
}

// The column AutoAWQ puts at nibble i of a word: 0 2 4 6 1 3 5 7.
constexpr int kAwqPack[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// qweight, qzeros, scales (and g_idx) of one quantised weight, as each layout stores them.
void pack(t::StTensors& out, const std::string& module, const Quantised& r, int64_t N, int64_t K, const Layout& L) {
  const int64_t G = L.group_size == -1 ? K : L.group_size, groups = K / G;
  std::vector<uint32_t> qweight, qzeros(static_cast<size_t>(groups * N / 8), 0);
  const bool v1 = L.format == "gptq";
  if (L.method == "gptq") {
    qweight.assign(static_cast<size_t>(K / 8 * N), 0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        qweight[static_cast<size_t>(k / 8 * N + n)] |= static_cast<uint32_t>(r.q[static_cast<size_t>(k * N + n)]) << (4 * (k % 8));
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t n = 0; n < N; ++n) {
        const int stored = (r.zero[static_cast<size_t>(g * N + n)] - (v1 ? 1 : 0)) & 15;
        qzeros[static_cast<size_t>(g * N / 8 + n / 8)] |= static_cast<uint32_t>(stored) << (4 * (n % 8));
      }
    out[module + ".qweight"] = {"I32", {K / 8, N}, bytes_of(qweight)};
    out[module + ".g_idx"] = {"I32", {K}, bytes_of(r.g_idx)};
  } else {
    qweight.assign(static_cast<size_t>(K * N / 8), 0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n8 = 0; n8 < N / 8; ++n8)
        for (int i = 0; i < 8; ++i)
          qweight[static_cast<size_t>(k * N / 8 + n8)] |=
              static_cast<uint32_t>(r.q[static_cast<size_t>(k * N + 8 * n8 + kAwqPack[i])]) << (4 * i);
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t n8 = 0; n8 < N / 8; ++n8)
        for (int i = 0; i < 8; ++i)
          qzeros[static_cast<size_t>(g * N / 8 + n8)] |=
              static_cast<uint32_t>(r.zero[static_cast<size_t>(g * N + 8 * n8 + kAwqPack[i])]) << (4 * i);
    out[module + ".qweight"] = {"I32", {K, N / 8}, bytes_of(qweight)};
  }
  out[module + ".qzeros"] = {"I32", {groups, N / 8}, bytes_of(qzeros)};
  out[module + ".scales"] = {"F16", {groups, N}, bytes_of(r.scale)};
}

nlohmann::json quantization_config(const Layout& L) {
  if (L.method == "awq")
    return {{"quant_method", "awq"}, {"bits", 4}, {"group_size", L.group_size}, {"zero_point", true},
            {"version", "gemm"}, {"modules_to_not_convert", {"in_proj_a", "in_proj_b", "visual"}}};
  return {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", L.group_size}, {"desc_act", L.desc_act},
          {"sym", L.sym}, {"checkpoint_format", L.format}, {"lm_head", false},
          {"dynamic", {{"-:.*linear_attn\\.in_proj_[ab]", nlohmann::json::object()}, {"-:.*visual.*", nlohmann::json::object()}}}};
}

void edit_config(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(t::read_text(dir / "config.json"));
  edit(j);
  t::write_text(dir / "config.json", j.dump(2));
}

// The checkpoint in src (its config files and model.safetensors) in layout L into dir, and its
// dequantised twin into twin (if given).
void write_int4(const fs::path& src, const fs::path& dir, const Layout& L, const fs::path& twin = {},
                const std::function<void(t::StTensors&)>& edit = {}) {
  std::mt19937 rng(7);
  const auto quantised = L.quantised ? L.quantised : linear_target;
  t::StTensors packed, values;
  for (const auto& [name, ts] : t::read_safetensors(src / "model.safetensors")) {
    if (ts.shape.size() != 2 || !quantised(name)) {
      packed[name] = values[name] = ts;
      continue;
    }
    const int64_t N = ts.shape[0], K = ts.shape[1];
    const Quantised r = quantise(f32_values(ts), N, K, L, rng);
    pack(packed, name.substr(0, name.size() - 7), r, N, K, L);
    values[name] = {"F32", ts.shape, bytes_of(r.values)};
  }
  if (edit) edit(packed);
  const auto copy_configs = [&](const fs::path& to) {
    for (const auto& f : fs::directory_iterator(src))
      if (f.path().extension() != ".safetensors")
        fs::copy_file(f.path(), to / f.path().filename(), fs::copy_options::overwrite_existing);
  };
  copy_configs(dir);
  edit_config(dir, [&](nlohmann::json& j) { j["quantization_config"] = quantization_config(L); });
  t::write_safetensors(dir / "model.safetensors", packed);
  if (!twin.empty()) {
    copy_configs(twin);
    t::write_safetensors(twin / "model.safetensors", values);
  }
}

void write_int4_tiny(const fs::path& dir, const Layout& L, const fs::path& twin = {},
                     const std::function<void(t::StTensors&)>& edit = {}) {
  write_int4(t::tiny_dir(), dir, L, twin, edit);
}

std::vector<float> logits_of(const fs::path& dir, const q::LoadOptions& options = {},
                             const ds::kernels::cpu::CpuBackendOptions& backend = {}) {
  t::Harness h(dir, 64, 4, 4, options, backend);
  return h.prefill(h.add_sequence(), kPrompt);
}

std::string load_error(const fs::path& dir, const q::LoadOptions& options = {}) {
  auto be = ds::kernels::cpu::make_cpu_backend();
  try {
    q::Model::load(*be, dir, options);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - b[i]));
  return d;
}

double max_abs(const std::vector<float>& a) {
  double m = 0;
  for (float v : a) m = std::max(m, std::abs(double(v)));
  return m;
}

uint32_t word_at(const t::StTensor& ts, int64_t i) {
  uint32_t w;
  std::memcpy(&w, ts.bytes.data() + 4 * i, 4);
  return w;
}

// The checkpoint's tensors with each 4-bit module replaced by its F32 values, decoded here from
// the layouts' definitions (v1 GPTQ files: zero = stored + 1, which is sym's 8).
t::StTensors unpacked(const t::StTensors& in, const std::string& method) {
  t::StTensors out;
  for (const auto& [name, ts] : in) {
    if (name.size() < 8 || name.compare(name.size() - 8, 8, ".qweight") != 0) {
      if (name.find(".qzeros") == std::string::npos && name.find(".scales") == std::string::npos &&
          name.find(".g_idx") == std::string::npos)
        out[name] = ts;
      continue;
    }
    const std::string m = name.substr(0, name.size() - 8);
    const t::StTensor& qz = in.at(m + ".qzeros");
    const t::StTensor& sc = in.at(m + ".scales");
    const int64_t groups = sc.shape[0], N = sc.shape[1];
    const int64_t K = method == "gptq" ? ts.shape[0] * 8 : ts.shape[0];
    std::vector<float> w(static_cast<size_t>(N * K));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        int code, zero;
        int64_t g;
        if (method == "gptq") {
          code = static_cast<int>(word_at(ts, k / 8 * N + n) >> (4 * (k % 8))) & 15;
          g = static_cast<int32_t>(word_at(in.at(m + ".g_idx"), k));
          zero = (static_cast<int>(word_at(qz, g * N / 8 + n / 8) >> (4 * (n % 8))) & 15) + 1;
        } else {
          const int nibble = static_cast<int>(std::find(kAwqPack, kAwqPack + 8, n % 8) - kAwqPack);
          code = static_cast<int>(word_at(ts, k * N / 8 + n / 8) >> (4 * nibble)) & 15;
          g = k / (K / groups);
          zero = static_cast<int>(word_at(qz, g * N / 8 + n / 8) >> (4 * nibble)) & 15;
        }
        uint16_t h;
        std::memcpy(&h, sc.bytes.data() + 2 * (g * N + n), 2);
        w[static_cast<size_t>(n * K + k)] = ds::f16_to_f32(h) * static_cast<float>(code - zero);
      }
    out[m + ".weight"] = {"F32", {N, K}, bytes_of(w)};
  }
  return out;
}

}  // namespace

TEST_CASE("int4: GPTQ and AWQ checkpoints load to their dequantised values", "[int4][loading]") {
  const auto everything = [](const std::string& n) {
    return linear_target(n) || n == "lm_head.weight" || n == kP + "embed_tokens.weight";
  };
  struct Case {
    const char* what;
    Layout layout;
  };
  const std::vector<Case> cases = {
      {"GPTQ as Qwen's releases (group 128, sym, v1)", {}},
      {"GPTQ, MLP only", {.quantised = mlp_target}},
      {"GPTQ, act order, group 32", {.group_size = 32, .desc_act = true}},
      {"GPTQ, asymmetric, group 64, v1", {.group_size = 64, .sym = false}},
      {"GPTQ, asymmetric, act order, group 32, v2", {.group_size = 32, .desc_act = true, .sym = false, .format = "gptq_v2"}},
      {"GPTQ, one group per row, the embedding and lm_head too",
       {.group_size = -1, .quantised = everything}},
      {"AWQ, group 128", {.method = "awq"}},
      {"AWQ, group 32", {.method = "awq", .group_size = 32}},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.what) {
      t::TempDir dir, twin;
      write_int4_tiny(dir.path(), c.layout, twin.path());
      const q::ModelConfig config = q::ModelConfig::load(dir.path());
      REQUIRE(config.int4);
      CHECK(config.int4->method_name() == c.layout.method);
      const std::vector<float> want = logits_of(twin.path());
      // Dequantised on the host: the twin's weights exactly, so the same logits.
      CHECK(logits_of(dir.path()) == want);
      // Kept 4-bit up to the backend (which widens them at upload here): the same values; the
      // DeltaNet's in_proj runs as two GEMMs then, so allow for OpenBLAS's summation order.
      const ds::kernels::cpu::CpuBackendOptions keep{.int4_weights = true};
      CHECK(max_abs_diff(logits_of(dir.path(), {}, keep), want) <= 1e-5 * max_abs(want));
      CHECK(max_abs_diff(logits_of(dir.path(), {}, {.fused_projection_rows = 64, .int4_weights = true}), want) <=
            1e-5 * max_abs(want));
      // --quantization naming the checkpoint's own method changes nothing.
      const q::LoadOptions same{c.layout.method == "gptq" ? q::Quantization::gptq : q::Quantization::awq};
      CHECK(logits_of(dir.path(), same) == want);
    }
  }
}

TEST_CASE("int4: what stays 4-bit on a backend that keeps it", "[int4][loading]") {
  t::TempDir dir;
  write_int4_tiny(dir.path(), {.group_size = 32, .desc_act = true});
  auto keep = ds::kernels::cpu::make_cpu_backend({.int4_weights = true});
  auto widen = ds::kernels::cpu::make_cpu_backend();
  const auto kept = q::Model::load(*keep, dir.path());
  const auto widened = q::Model::load(*widen, dir.path());
  // A quantised in_proj_qkv / in_proj_z keeps the bf16 in_proj_b/a out of its stack.
  for (const auto& L : kept->weights().layers)
    if (L.kind == q::LayerKind::deltanet) {
      CHECK(L.deltanet.in_proj_ba.dim(0) == 2 * kept->config().deltanet_v_heads);
      CHECK(L.deltanet.in_proj.dim(0) == kept->config().conv_dim() + kept->config().deltanet_value_dim());
    }
  for (const auto& L : widened->weights().layers)
    if (L.kind == q::LayerKind::deltanet) CHECK(L.deltanet.in_proj_ba.empty());
  // Without quantised in_proj_qkv / in_proj_z the stack stays whole.
  t::TempDir mlp;
  write_int4_tiny(mlp.path(), {.quantised = mlp_target});
  const auto mlp_kept = q::Model::load(*keep, mlp.path());
  for (const auto& L : mlp_kept->weights().layers)
    if (L.kind == q::LayerKind::deltanet) CHECK(L.deltanet.in_proj_ba.empty());
}

TEST_CASE("int4: the MTP module in bf16 (as the published GPTQ builds keep it) or quantised", "[int4][mtp]") {
  for (bool module_quantised : {false, true}) {
    DYNAMIC_SECTION("module quantised " << module_quantised) {
      t::TempDir src, dir, twin;
      t::write_tiny_mtp_checkpoint(src.path());
      const Layout L{.group_size = 32, .desc_act = true, .quantised = [&](const std::string& n) {
                       const bool module = n.rfind("mtp.", 0) == 0;
                       return module ? module_quantised && (linear_target(n) || n == "mtp.fc.weight") : linear_target(n);
                     }};
      write_int4(src.path(), dir.path(), L, twin.path());
      const auto run = [&](const fs::path& d, const ds::kernels::cpu::CpuBackendOptions& backend) {
        t::Harness h(d, 16, 4, 2, {.mtp = true}, backend);
        REQUIRE(h.model().has_mtp());
        t::Harness::Seq& s = h.add_sequence();
        const std::vector<int32_t> prompt = {17, 512, 1005, 3, 1023, 640, 88, 5, 900, 41};
        std::vector<float> out = h.prefill(s, prompt);
        std::vector<int32_t> shifted(prompt.begin() + 1, prompt.end());
        shifted.push_back(7);
        q::MtpBatch b;
        b.seqs.push_back({shifted, 0, s.table.block_ids(), s.slot.id, 0, true});
        const std::vector<float> draft = h.model().forward_mtp(b).to_host();
        out.insert(out.end(), draft.begin(), draft.end());
        return out;
      };
      const std::vector<float> want = run(twin.path(), {});
      CHECK(run(dir.path(), {}) == want);
      CHECK(max_abs_diff(run(dir.path(), {.int4_weights = true}), want) <= 1e-5 * max_abs(want));
    }
  }
}

TEST_CASE("int4: quantization_config keys the loader refuses", "[int4][loading]") {
  t::TempDir dir;
  write_int4_tiny(dir.path(), {});
  using Edit = std::pair<std::function<void(nlohmann::json&)>, std::string>;
  const std::vector<Edit> edits = {
      {[](nlohmann::json& c) { c["bits"] = 8; }, "bits 8 is not supported (only 4-bit gptq weights)"},
      {[](nlohmann::json& c) { c.erase("bits"); }, "no bits"},
      {[](nlohmann::json& c) { c["group_size"] = 0; }, "group_size 0 must be positive or -1"},
      {[](nlohmann::json& c) { c["checkpoint_format"] = "marlin"; }, "checkpoint_format marlin is not supported"},
      {[](nlohmann::json& c) { c["format"] = "gptq_v2"; }, "checkpoint_format gptq and format gptq_v2 disagree"},
      {[](nlohmann::json& c) { c["pack_dtype"] = "int16"; }, "pack_dtype int16 is not supported"},
      {[](nlohmann::json& c) { c["desc_act"] = "yes"; }, "desc_act \"yes\" is not true or false"},
      {[](nlohmann::json& c) { c["dynamic"]["+:.*down_proj"] = {{"bits", 8}}; },
       "dynamic rule \"+:.*down_proj\" overrides {\"bits\":8}: per-module settings are not supported"},
      {[](nlohmann::json& c) { c["quant_method"] = "squeezellm"; }, "quant_method squeezellm is not supported"},
      {[](nlohmann::json& c) { c = {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemv"}}; },
       "version gemv is not supported (only AWQ's gemm layout)"},
      {[](nlohmann::json& c) { c = {{"quant_method", "awq"}, {"w_bit", 4}, {"q_group_size", 128}, {"zero_point", false}}; },
       "zero_point false is not supported"},
      {[](nlohmann::json& c) { c = {{"quant_method", "awq"}, {"w_bit", 3}, {"q_group_size", 128}}; },
       "bits 3 is not supported (only 4-bit awq weights)"},
  };
  for (const auto& [edit, message] : edits) {
    edit_config(dir.path(), [&](nlohmann::json& j) {
      j["quantization_config"] = quantization_config({});
      edit(j["quantization_config"]);
    });
    CHECK_THAT(load_error(dir.path()), Contains("config.json: quantization_config: ") && Contains(message));
  }
}

TEST_CASE("int4: tensor layouts the loader refuses, naming the tensor", "[int4][loading]") {
  const std::string down = kP + "layers.0.mlp.down_proj";
  const std::string up = kP + "layers.0.mlp.up_proj";
  t::TempDir dir;
  SECTION("a qweight of the wrong shape") {
    write_int4_tiny(dir.path(), {}, {}, [&](t::StTensors& ts) {
      auto& w = ts[down + ".qweight"];
      w.shape = {w.shape[1], w.shape[0]};
    });
    CHECK_THAT(load_error(dir.path()), Contains("tensor " + down + ".qweight has shape [128, 48], expected [48, 128]"));
  }
  SECTION("AWQ's qweight in a GPTQ checkpoint") {
    write_int4_tiny(dir.path(), {.method = "awq"});
    edit_config(dir.path(), [](nlohmann::json& j) { j["quantization_config"] = quantization_config({}); });
    CHECK_THAT(load_error(dir.path()), Contains(".qweight has shape") && Contains("expected"));
  }
  SECTION("scales of an integer type") {
    write_int4_tiny(dir.path(), {}, {}, [&](t::StTensors& ts) {
      auto& s = ts[down + ".scales"];
      s.dtype = "I16";
    });
    CHECK_THAT(load_error(dir.path()), Contains("tensor " + down + ".scales has dtype I16, expected F16 or BF16 or F32"));
  }
  SECTION("no qzeros") {
    write_int4_tiny(dir.path(), {}, {}, [&](t::StTensors& ts) { ts.erase(down + ".qzeros"); });
    CHECK_THAT(load_error(dir.path()), Contains("tensor " + down + ".qzeros is missing"));
  }
  SECTION("sym zeros that are not 8") {
    write_int4_tiny(dir.path(), {}, {}, [&](t::StTensors& ts) {
      auto& z = ts[down + ".qzeros"].bytes;
      z[0] = static_cast<uint8_t>((z[0] & 0xf0) | 5);
    });
    CHECK_THAT(load_error(dir.path()),
               Contains("tensor " + down + ".qzeros holds 5 for group 0, output 0, but sym is true"));
  }
  SECTION("act order without g_idx") {
    write_int4_tiny(dir.path(), {.group_size = 32, .desc_act = true}, {}, [&](t::StTensors& ts) { ts.erase(up + ".g_idx"); });
    CHECK_THAT(load_error(dir.path()), Contains("tensor " + up + ".g_idx is missing (desc_act"));
  }
  SECTION("a g_idx out of range, or uneven") {
    write_int4_tiny(dir.path(), {.group_size = 32, .desc_act = true}, {}, [&](t::StTensors& ts) {
      auto& g = ts[up + ".g_idx"].bytes;
      const int32_t big = 9;
      std::memcpy(g.data(), &big, 4);
    });
    CHECK_THAT(load_error(dir.path()), Contains("tensor " + up + ".g_idx puts input 0 in group 9 of 4"));
    write_int4_tiny(dir.path(), {.group_size = 32, .desc_act = true}, {}, [&](t::StTensors& ts) {
      auto& g = ts[up + ".g_idx"].bytes;
      int32_t v;
      std::memcpy(&v, g.data(), 4);
      v = (v + 1) % 4;
      std::memcpy(g.data(), &v, 4);
    });
    CHECK_THAT(load_error(dir.path()), Contains("tensor " + up + ".g_idx puts 3") &&
                                           Contains("inputs in group") && Contains("not group_size 32"));
  }
  SECTION("a g_idx in act order although desc_act is false") {
    write_int4_tiny(dir.path(), {.group_size = 32, .desc_act = true});
    edit_config(dir.path(), [](nlohmann::json& j) { j["quantization_config"]["desc_act"] = false; });
    CHECK_THAT(load_error(dir.path()), Contains(".g_idx is not input / group_size, but desc_act is false"));
  }
  SECTION("an input size that is not a multiple of the group size") {
    write_int4_tiny(dir.path(), {});
    edit_config(dir.path(), [](nlohmann::json& j) { j["quantization_config"]["group_size"] = 96; });
    CHECK_THAT(load_error(dir.path()), Contains("whose input size is not a multiple of group_size 96"));
  }
  SECTION("4-bit weights without quantization_config") {
    write_int4_tiny(dir.path(), {});
    edit_config(dir.path(), [](nlohmann::json& j) { j.erase("quantization_config"); });
    CHECK_THAT(load_error(dir.path()), Contains("is stored as a GPTQ / AWQ weight but config.json has no gptq or awq"));
  }
  SECTION("a weight stored both ways") {
    write_int4_tiny(dir.path(), {}, {}, [&](t::StTensors& ts) {
      ts[down + ".weight"] = {"BF16", {128, 384}, std::vector<uint8_t>(128 * 384 * 2, 0)};
    });
    CHECK_THAT(load_error(dir.path()), Contains("unexpected tensor " + down + ".g_idx"));
  }
  SECTION("a GPTQ tensor left over") {
    write_int4_tiny(dir.path(), {}, {}, [&](t::StTensors& ts) { ts[down + ".bias"] = ts[down + ".g_idx"]; });
    CHECK_THAT(load_error(dir.path()), Contains("unexpected tensor " + down + ".bias"));
  }
}

TEST_CASE("int4: --quantization against what the checkpoint is", "[int4][loading]") {
  t::TempDir gptq, awq;
  write_int4_tiny(gptq.path(), {});
  write_int4_tiny(awq.path(), {.method = "awq"});
  CHECK_THAT(load_error(t::tiny_dir(), {q::Quantization::gptq}),
             Contains("--quantization gptq loads GPTQ checkpoints as released, and this one is not quantised"));
  CHECK_THAT(load_error(gptq.path(), {q::Quantization::awq}),
             Contains("--quantization awq loads AWQ checkpoints as released, and this one is a gptq checkpoint"));
  CHECK_THAT(load_error(awq.path(), {q::Quantization::fp8}), Contains("--quantization fp8 cannot quantise an awq checkpoint"));
  CHECK(load_error(awq.path(), {q::Quantization::awq}) == "no error");
  CHECK(q::parse_quantization("gptq") == q::Quantization::gptq);
  CHECK(q::parse_quantization("awq") == q::Quantization::awq);
  CHECK_THROWS_WITH(q::parse_quantization("int4"), Contains("--quantization must be none, fp8, gptq or awq, got 'int4'"));
}

// The bundled 4-bit fixtures (tests/data/tiny-qwen35-gptq, -awq, written by
// bench/tools/make_int4_fixture.py): their layout, and their weights as decoded here. Hidden
// tag: tests/model/CMakeLists.txt runs these as their own CTest entry, registered where the
// fixtures are.
TEST_CASE("int4: the bundled fixtures hold what they say, and load to it", "[.int4-fixture]") {
  for (const std::string method : {"gptq", "awq"}) {
    DYNAMIC_SECTION(method) {
      const fs::path fx = t::data_path("tiny-qwen35-" + method);
      const q::ModelConfig config = q::ModelConfig::load(fx);
      REQUIRE(config.int4);
      CHECK(config.int4->method_name() == method);
      CHECK(config.int4->group_size == (method == "gptq" ? 32 : 64));
      CHECK(config.int4->desc_act == (method == "gptq"));
      const t::StTensors packed = t::read_safetensors(fx / "model.safetensors");
      int64_t quantised = 0, act_order = 0;
      for (const auto& [name, ts] : packed) {
        if (name.find(".qweight") != std::string::npos) ++quantised;
        if (name.find(".g_idx") == std::string::npos) continue;
        for (int64_t k = 0; k < ts.shape[0]; ++k)
          if (static_cast<int64_t>(word_at(ts, k)) != k / 32) {
            ++act_order;
            break;
          }
      }
      CHECK(quantised == 50);
      CHECK(act_order == (method == "gptq" ? 50 : 0));
      t::TempDir twin;
      t::copy_tiny_configs(twin.path());
      t::write_safetensors(twin.path() / "model.safetensors", unpacked(packed, method));
      const std::vector<float> want = logits_of(twin.path());
      CHECK(logits_of(fx) == want);
      CHECK(max_abs_diff(logits_of(fx, {}, {.int4_weights = true}), want) <= 1e-5 * max_abs(want));
    }
  }
}
