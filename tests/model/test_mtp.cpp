// The MTP module (model/qwen35/mtp.h) on the tiny checkpoint with random mtp.* tensors: its
// first two drafts' logits (a step over a whole prompt from the target's hidden states, then a
// chained step from its own output) against a straightforward double-precision computation
// from the weights written here; and a checkpoint without the module refused by name.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "model/qwen35/model.h"
#include "model/qwen35/refcheck.h"
#include "tests/model/harness.h"
#include "tests/model/mtp_checkpoint.h"
#include "tests/model/st_writer.h"

using Catch::Matchers::Contains;
namespace t = ds::test;
namespace q = ds::qwen35;

namespace {

using Vec = std::vector<double>;

// The checkpoint's tensors as doubles.
struct Weights {
  explicit Weights(const std::filesystem::path& file) : all(t::read_safetensors(file)) {}
  Vec operator()(const std::string& name) const {
    const t::StTensor& s = all.at(name);
    const t::StTensor f = s.dtype == "F32" ? s : t::bf16_to(s, "F32");
    std::vector<float> v(f.bytes.size() / 4);
    std::memcpy(v.data(), f.bytes.data(), f.bytes.size());
    return Vec(v.begin(), v.end());
  }
  t::StTensors all;
};

// y = W x for W [rows, cols] row-major, reading x's `cols` values.
Vec matvec(const Vec& w, const Vec& x, size_t rows, size_t cols, size_t col0 = 0, size_t stride = 0) {
  if (stride == 0) stride = cols;
  Vec y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) y[r] += w[r * stride + col0 + c] * x[c];
  return y;
}

// Zero-centred RMSNorm: x / rms(x) * (1 + w).
Vec norm1p(const Vec& x, const Vec& w) {
  double ms = 0;
  for (double v : x) ms += v * v;
  ms /= static_cast<double>(x.size());
  const double inv = 1.0 / std::sqrt(ms + 1e-6);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * (1 + w[i]);
  return y;
}

// Rotate-half RoPE on the first rd dims of a head.
void rope(double* x, int64_t pos, size_t rd, double theta) {
  for (size_t i = 0; i < rd / 2; ++i) {
    const double a = static_cast<double>(pos) * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rd));
    const double x1 = x[i], x2 = x[i + rd / 2];
    x[i] = x1 * std::cos(a) - x2 * std::sin(a);
    x[i + rd / 2] = x2 * std::cos(a) + x1 * std::sin(a);
  }
}

// The module, written out position by position: inputs (token at p + 1, hidden state at p).
struct NaiveMtp {
  NaiveMtp(const Weights& w, const q::ModelConfig& c) : w(w), c(c) {}

  // Runs position p (positions arrive in order 0, 1, ...); returns the module's output.
  Vec step(int32_t token, const Vec& hidden) {
    const size_t H = static_cast<size_t>(c.hidden_size), D = static_cast<size_t>(c.head_dim);
    const size_t Nq = static_cast<size_t>(c.num_heads), Nkv = static_cast<size_t>(c.num_kv_heads);
    const size_t I = static_cast<size_t>(c.intermediate_size);
    const std::string L = "mtp.layers.0.";
    const int64_t pos = static_cast<int64_t>(keys.size());
    const Vec embed_all = w("model.language_model.embed_tokens.weight");
    const Vec e(embed_all.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(token) * H),
                embed_all.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(token) + 1) * H));
    const Vec en = norm1p(e, w("mtp.pre_fc_norm_embedding.weight"));
    const Vec hn = norm1p(hidden, w("mtp.pre_fc_norm_hidden.weight"));
    const Vec fc = w("mtp.fc.weight");
    Vec y = matvec(fc, en, H, H, 0, 2 * H);
    const Vec yh = matvec(fc, hn, H, H, H, 2 * H);
    for (size_t i = 0; i < H; ++i) y[i] += yh[i];

    const Vec x = norm1p(y, w(L + "input_layernorm.weight"));
    const Vec qg = matvec(w(L + "self_attn.q_proj.weight"), x, 2 * Nq * D, H);
    Vec k = matvec(w(L + "self_attn.k_proj.weight"), x, Nkv * D, H);
    const Vec v = matvec(w(L + "self_attn.v_proj.weight"), x, Nkv * D, H);
    const Vec qn = w(L + "self_attn.q_norm.weight"), kn = w(L + "self_attn.k_norm.weight");
    const size_t rd = static_cast<size_t>(c.rotary_dim);
    for (size_t h = 0; h < Nkv; ++h) {
      Vec head = norm1p(Vec(k.begin() + static_cast<std::ptrdiff_t>(h * D), k.begin() + static_cast<std::ptrdiff_t>((h + 1) * D)), kn);
      rope(head.data(), pos, rd, c.rope_theta);
      std::copy(head.begin(), head.end(), k.begin() + static_cast<std::ptrdiff_t>(h * D));
    }
    keys.push_back(k);
    values.push_back(v);
    Vec attn(Nq * D, 0.0);
    for (size_t h = 0; h < Nq; ++h) {
      const auto* qh = qg.data() + h * 2 * D;  // per head: D query values, then D gate values
      Vec qv = norm1p(Vec(qh, qh + D), qn);
      rope(qv.data(), pos, rd, c.rope_theta);
      const size_t kvh = h / (Nq / Nkv);
      Vec scores;
      double mx = -1e300;
      for (const Vec& kp : keys) {
        double s = 0;
        for (size_t d = 0; d < D; ++d) s += qv[d] * kp[kvh * D + d];
        scores.push_back(s / std::sqrt(static_cast<double>(D)));
        mx = std::max(mx, scores.back());
      }
      double z = 0;
      for (double& s : scores) z += (s = std::exp(s - mx));
      for (size_t j = 0; j < keys.size(); ++j)
        for (size_t d = 0; d < D; ++d) attn[h * D + d] += scores[j] / z * values[j][kvh * D + d];
      for (size_t d = 0; d < D; ++d) attn[h * D + d] *= 1.0 / (1.0 + std::exp(-qh[D + d]));
    }
    const Vec o = matvec(w(L + "self_attn.o_proj.weight"), attn, H, Nq * D);
    for (size_t i = 0; i < H; ++i) y[i] += o[i];
    const Vec x2 = norm1p(y, w(L + "post_attention_layernorm.weight"));
    const Vec g = matvec(w(L + "mlp.gate_proj.weight"), x2, I, H);
    const Vec u = matvec(w(L + "mlp.up_proj.weight"), x2, I, H);
    Vec act(I);
    for (size_t i = 0; i < I; ++i) act[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    const Vec dn = matvec(w(L + "mlp.down_proj.weight"), act, H, I);
    for (size_t i = 0; i < H; ++i) y[i] += dn[i];
    return norm1p(y, w("mtp.norm.weight"));
  }
  Vec logits(const Vec& out) const {
    return matvec(w("lm_head.weight"), out, static_cast<size_t>(c.vocab_size), static_cast<size_t>(c.hidden_size));
  }

  const Weights& w;
  const q::ModelConfig& c;
  std::vector<Vec> keys, values;
};

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

double rel_error(std::span<const float> got, const Vec& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("mtp: the module's chained drafts match a straightforward computation", "[mtp]") {
  t::TempDir dir;
  t::write_tiny_mtp_checkpoint(dir.path());
  t::Harness h(dir.path(), 16, 4, 2, {.mtp = true});
  q::Model& m = h.model();
  REQUIRE(m.has_mtp());
  const q::ModelConfig& c = m.config();
  CHECK(m.cache_geometry().n_attention_layers == c.num_full_layers() + 1);

  // The target over a prompt of 10 tokens (room for 12 in 3 blocks of 4), its hidden states
  // after the final norm kept by the observer.
  const std::vector<int32_t> prompt = {17, 512, 1005, 3, 1023, 640, 88, 5, 900, 41};
  const auto n = static_cast<int64_t>(prompt.size());
  std::vector<Vec> hidden;
  m.set_hidden_state_observer([&](int index, const ds::kernels::Tensor& x) {
    if (index != c.num_layers + 1) return;
    std::vector<float> v(static_cast<size_t>(x.numel()));
    m.backend().copy_to_host(x, v);
    for (int64_t r = 0; r < n; ++r)
      hidden.emplace_back(v.begin() + r * c.hidden_size, v.begin() + (r + 1) * c.hidden_size);
  });
  t::Harness::Seq& s = h.add_sequence();
  const std::vector<float> target = h.prefill(s, prompt);
  m.set_hidden_state_observer({});
  REQUIRE(static_cast<int64_t>(hidden.size()) == n);
  const int32_t next = argmax(std::span<const float>(target).subspan(static_cast<size_t>((n - 1) * c.vocab_size)));

  // Module step 1: every position p of the prompt reads the token at p + 1 (the target's
  // next token after the last) and the target's hidden state at p.
  std::vector<int32_t> shifted(prompt.begin() + 1, prompt.end());
  shifted.push_back(next);
  q::MtpBatch b;
  b.seqs.push_back({shifted, 0, s.table.block_ids(), s.slot.id, 0, true});
  const std::vector<float> got1 = m.forward_mtp(b).to_host();
  REQUIRE(got1.size() == static_cast<size_t>(c.vocab_size));

  const Weights w(dir.path() / "model.safetensors");
  NaiveMtp naive(w, c);
  Vec out;
  for (int64_t p = 0; p < n; ++p) out = naive.step(shifted[static_cast<size_t>(p)], hidden[static_cast<size_t>(p)]);
  const Vec want1 = naive.logits(out);
  CHECK(rel_error(got1, want1) < 1e-4);
  const int32_t draft1 = argmax(got1);

  // A drafting vocabulary (SpeculativeConfig::draft_vocab_size): the same step again gives
  // the logits of the first ids only, rounded up to 128 rows, as the whole vocabulary's did
  // (the step rewrites the module's K/V with the same values).
  CHECK(m.mtp_vocab(0) == c.vocab_size);
  CHECK(m.mtp_vocab(128) == 128);
  CHECK(m.mtp_vocab(300) == 384);
  CHECK(m.mtp_vocab(c.vocab_size - 1) == c.vocab_size);
  CHECK(m.mtp_vocab(c.vocab_size * 4) == c.vocab_size);
  b.vocab = 300;
  const q::Logits& pruned = m.forward_mtp(b);
  CHECK(pruned.vocab() == 384);
  const std::vector<float> got1p = pruned.to_host();
  REQUIRE(got1p.size() == 384);
  CHECK(rel_error(got1p, Vec(got1.begin(), got1.begin() + 384)) < 1e-6);
  // Asking for a token map the model was not loaded with is refused.
  b.vocab = 0;
  b.draft_tokens = true;
  CHECK_THROWS_WITH(m.forward_mtp(b), Contains("loaded without one"));
  b.draft_tokens = false;

  // Module step 2 (the chain): position n reads draft 1 and the module's output at n - 1.
  q::MtpBatch chain;
  chain.source = q::MtpSource::module;
  chain.seqs.push_back({std::span<const int32_t>(&draft1, 1), n, s.table.block_ids(), s.slot.id, n - 1, true});
  const std::vector<float> got2 = m.forward_mtp(chain).to_host();
  const Vec want2 = naive.logits(naive.step(draft1, out));
  CHECK(rel_error(got2, want2) < 1e-4);

  // A hidden-state row outside its source is refused before anything runs.
  chain.seqs[0].hidden_row = 1;  // the chain step's output has one row
  CHECK_THROWS_WITH(m.forward_mtp(chain), Contains("reads hidden rows [1, 2) of a source holding 1"));
}

TEST_CASE("mtp: a draft token map's logits are the whole vocabulary's columns of its ids", "[mtp]") {
  t::TempDir dir;
  t::write_tiny_mtp_checkpoint(dir.path());
  // Out of order, with a run of consecutive ids (one gathered copy) and single ones.
  const std::vector<int32_t> map = {900, 3, 4, 5, 6, 1023, 0, 512};
  t::Harness whole(dir.path(), 16, 4, 2, {.mtp = true});
  t::Harness mapped(dir.path(), 16, 4, 2, {.mtp = true, .mtp_draft_tokens = map});
  const std::vector<int32_t> prompt = {17, 512, 1005, 3, 1023, 640, 88, 5};
  std::vector<float> got[2];
  t::Harness* hs[2] = {&whole, &mapped};
  for (int k = 0; k < 2; ++k) {
    t::Harness& h = *hs[k];
    t::Harness::Seq& s = h.add_sequence();
    h.prefill(s, prompt);
    std::vector<int32_t> shifted(prompt.begin() + 1, prompt.end());
    shifted.push_back(7);
    q::MtpBatch b;
    b.seqs.push_back({shifted, 0, s.table.block_ids(), s.slot.id, 0, true});
    b.draft_tokens = k == 1;
    const q::Logits& l = h.model().forward_mtp(b);
    CHECK(l.vocab() == (k == 1 ? static_cast<int64_t>(map.size()) : h.model().config().vocab_size));
    got[k] = l.to_host();
  }
  REQUIRE(got[1].size() == map.size());
  for (size_t i = 0; i < map.size(); ++i) {
    INFO("column " << i << " (token " << map[i] << ")");
    CHECK(got[1][i] == Approx(got[0][static_cast<size_t>(map[i])]).epsilon(1e-5));
  }
  // An id past the vocabulary is refused at load, naming it.
  CHECK_THROWS_WITH(t::Harness(dir.path(), 16, 4, 2, {.mtp = true, .mtp_draft_tokens = {1, 1024}}),
                    Contains("token id 1024 is outside the vocabulary of 1024"));
}

TEST_CASE("mtp: a checkpoint without the module is refused by name", "[mtp]") {
  auto backend = ds::kernels::cpu::make_cpu_backend();
  CHECK_THROWS_WITH(q::Model::load(*backend, t::tiny_dir(), {.mtp = true}),
                    Contains("speculative method \"mtp\" needs the checkpoint's MTP module") &&
                        Contains("no mtp_num_hidden_layers"));
  // The config names the module but the tensors are not there.
  t::TempDir dir;
  t::copy_tiny_configs(dir.path());
  nlohmann::json config = nlohmann::json::parse(t::read_text(dir.path() / "config.json"));
  config["text_config"]["mtp_num_hidden_layers"] = 1;
  t::write_text(dir.path() / "config.json", config.dump());
  std::filesystem::copy_file(t::tiny_dir() / "model.safetensors", dir.path() / "model.safetensors");
  CHECK_THROWS_WITH(q::Model::load(*backend, dir.path(), {.mtp = true}), Contains("no mtp.fc.weight"));
  // Without the option, a checkpoint's module is skipped: no MTP pool, nothing to run.
  t::TempDir with;
  t::write_tiny_mtp_checkpoint(with.path());
  auto plain = q::Model::load(*backend, with.path());
  CHECK_FALSE(plain->has_mtp());
  CHECK(plain->cache_geometry().n_attention_layers == plain->config().num_full_layers());
}
