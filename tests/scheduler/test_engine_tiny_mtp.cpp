// Speculative decoding with the MTP module ("mtp", scheduler/mtp_drafter.h) on the tiny
// checkpoint with a random module added (tests/model/mtp_checkpoint.h): every draft the engine
// verifies is the module's own prediction over the sequence so far, as a from-scratch run of
// target and module over it computes (so the module's K/V was filled right through chunked
// prefill, accepted drafts and the chain); K = 1..4 give plain decoding's tokens (HF's
// greedy reference on the fixture prompts, seeded sampling with n = 2 included) in mixed batches, under preemption, with prefix caching and after a cancellation,
// with no block or slot left behind and the drafts counted in the metrics; the benchmarks'
// simulated verdict (programs/bench_drafters) runs the module too; a model without the module
// is refused.
#include "programs/bench_drafters/simulated_verdict.h"
#include "tiny_engine_fixture.h"
#include "tests/model/harness.h"
#include "tests/model/mtp_checkpoint.h"

using namespace ds;
using namespace ds::scheduler;
using namespace ds::test;

namespace {

// The tiny model with the module, loaded once (its checkpoint in a directory that lives as
// long as the executable).
struct TinyMtp {
  TinyMtp() : backend(test::make_test_backend()) {
    write_tiny_mtp_checkpoint(dir.path());
    model = qwen35::Model::load(*backend, dir.path(), {.mtp = true});
    forward = std::make_unique<Qwen35ForwardModel>(*model);
  }
  TempDir dir;
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<qwen35::Model> model;
  std::unique_ptr<Qwen35ForwardModel> forward;
};

TinyMtp& tiny_mtp() {
  static TinyMtp t;
  return t;
}

SpeculativeConfig mtp(int32_t k) {
  SpeculativeConfig s;
  s.method = "mtp";
  s.num_speculative_tokens = k;
  return s;
}

std::vector<Outcome> plain_run(const std::vector<Request>& reqs) {
  Engine engine(*tiny_mtp().forward, config(200), kernels::cpu::make_cpu_sampler());
  return run_together(engine, reqs);
}

void check_counted(const EngineStats& s, int32_t k) {
  CHECK(s.spec_decode_drafts_total > 0);
  CHECK(s.spec_decode_draft_tokens_total >= s.spec_decode_drafts_total);
  CHECK(s.spec_decode_draft_tokens_total <= int64_t{k} * s.spec_decode_drafts_total);
  CHECK(s.spec_decode_accepted_tokens_total <= s.spec_decode_draft_tokens_total);
  int64_t per_position = 0;
  for (int64_t n : s.spec_decode_accepted_per_position) per_position += n;
  CHECK(per_position == s.spec_decode_accepted_tokens_total);
}

// Records the verify chunks the engine runs (every row sampled, more than one row).
class RecordingModel final : public ForwardingModel {
 public:
  struct Verify {
    int64_t start;
    std::vector<int32_t> tokens;  // the pending token, then the drafts
  };
  using ForwardingModel::ForwardingModel;
  const kernels::Tensor& forward(const qwen35::ForwardBatch& batch) override {
    for (const auto& c : batch.seqs)
      if (c.tokens.size() > 1 && c.logit_rows == static_cast<int32_t>(c.tokens.size()))
        verifies.push_back({c.n_cached, std::vector<int32_t>(c.tokens.begin(), c.tokens.end())});
    return inner_.forward(batch);
  }

  std::vector<Verify> verifies;
};

// The ids a draft may be: the first `vocab`, or a token map's.
struct Candidates {
  int64_t vocab = 0;
  std::vector<int32_t> map;
  bool has(int32_t t) const {
    return map.empty() ? t >= 0 && t < vocab : std::find(map.begin(), map.end(), t) != map.end();
  }
};

// Whether `token` is the argmax of row among the candidates (up to float rounding: within
// 1e-4 of the largest).
bool near_argmax(const std::vector<float>& row, int32_t token, const Candidates& c) {
  if (!c.has(token)) return false;
  float best = -std::numeric_limits<float>::infinity();
  if (c.map.empty())
    best = *std::max_element(row.begin(), row.begin() + c.vocab);
  else
    for (int32_t t : c.map) best = std::max(best, row[static_cast<size_t>(t)]);
  return row[static_cast<size_t>(token)] >= best - 1e-4f * std::max(1.0f, std::fabs(best));
}

// Checks a verify chunk's drafts against a from-scratch run over the sequence's first `start`
// tokens: the target over all of them at once, the module over every position (logits over the
// whole vocabulary), then the chain; a draft is the argmax among the candidates.
void check_drafts(Harness& h, const std::vector<int32_t>& seq, const RecordingModel::Verify& v, const Candidates& candidates) {
  const int64_t c = v.start;
  REQUIRE(c + 1 <= static_cast<int64_t>(seq.size()));
  REQUIRE(v.tokens[0] == seq[static_cast<size_t>(c)]);
  Harness::Seq& s = h.add_sequence();
  const std::vector<int32_t> head(seq.begin(), seq.begin() + c);
  h.prefill(s, head);
  auto room = h.blocks().reserve(s.table.blocks_needed(static_cast<int64_t>(v.tokens.size())));
  REQUIRE(room);
  h.blocks().commit(*room, s.table);
  std::vector<int32_t> next(seq.begin() + 1, seq.begin() + c + 1);
  qwen35::MtpBatch b;
  b.seqs.push_back({next, 0, s.table.block_ids(), s.slot.id, 0, true});
  for (size_t j = 1; j < v.tokens.size(); ++j) {
    INFO("position " << c << ", draft " << j);
    const std::vector<float> row = h.model().forward_mtp(b).to_host();
    CHECK(near_argmax(row, v.tokens[j], candidates));
    b.source = qwen35::MtpSource::module;
    b.seqs[0] = {std::span<const int32_t>(&v.tokens[j], 1), c + static_cast<int64_t>(j) - 1, s.table.block_ids(),
                 s.slot.id, j == 1 ? c - 1 : 0, true};
  }
  h.finish(s);
}

}  // namespace

TEST_CASE("tiny mtp: the engine's drafts are the module's own over the sequence so far", "[engine][tiny][mtp]") {
  // The from-scratch run is the CPU backend's: other backends' rounding may flip near-ties.
  if (test::test_backend_name() != "cpu") {
    WARN("drafts are compared with a CPU run only on the CPU backend");
    return;
  }
  Harness h(tiny_mtp().dir.path(), 128, 4, 2, {.mtp = true});
  // A simulated verdict (0.7) keeps drafts often, so the module's K/V must follow accepted
  // drafts too; prefill in chunks of 16. A drafting vocabulary of 300 ids (384 after rounding,
  // of 1,024) leaves out most of the ids the whole vocabulary's argmax picks.
  // A token map of 200 ids spread over the vocabulary (the model loaded with it) drafts among
  // those only.
  const int64_t V = tiny_mtp().model->config().vocab_size;
  std::vector<int32_t> map;
  for (int32_t t = 1000; t >= 0; t -= 5) map.push_back(t);
  auto mapped = qwen35::Model::load(*tiny_mtp().backend, tiny_mtp().dir.path(), {.mtp = true, .mtp_draft_tokens = map});
  Qwen35ForwardModel mapped_forward(*mapped);
  struct Case {
    double acceptance;
    int32_t draft_vocab;
    bool token_map;
  };
  for (const Case& k : {Case{1.0, 0, false}, Case{0.7, 0, false}, Case{0.7, 300, false}, Case{0.7, 0, true}}) {
    const double acceptance = k.acceptance;
    const int32_t draft_vocab = k.draft_vocab;
    INFO("acceptance " << acceptance << ", draft vocabulary " << draft_vocab << ", token map " << k.token_map);
    RecordingModel rec(k.token_map ? static_cast<ForwardModel&>(mapped_forward) : *tiny_mtp().forward);
    EngineConfig cfg = config(200, 16);
    cfg.speculative = mtp(3);
    cfg.speculative.draft_vocab_size = draft_vocab;
    if (k.token_map) cfg.speculative.draft_tokens = map;
    bench::SimulatedVerdict verdict = bench::simulated_verdict(rec, kernels::cpu::make_cpu_sampler(), acceptance, 5);
    Engine engine(*verdict.model, cfg, std::move(verdict.sampler));
    const std::vector<int32_t> prompt = tiny().prompts[3];  // 63 tokens
    const Outcome o = run_together(engine, {greedy_request(prompt, 40)})[0];
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), o.tokens.begin(), o.tokens.end());
    REQUIRE(rec.verifies.size() >= 5);
    const Candidates candidates = k.token_map ? Candidates{0, map} : Candidates{draft_vocab ? 384 : V, {}};
    for (const auto& v : rec.verifies) check_drafts(h, seq, v, candidates);
    if (acceptance < 1) CHECK(engine.stats().spec_decode_accepted_tokens_total > 5);
  }
}

TEST_CASE("tiny mtp: every K gives plain decoding's tokens in mixed batches", "[engine][tiny][mtp]") {
  const std::vector<Request> reqs = speculative_requests();
  const std::vector<Outcome> plain = plain_run(reqs);
  for (int32_t k = 1; k <= 4; ++k) {
    INFO("K=" << k);
    EngineConfig cfg = config(200);
    cfg.speculative = mtp(k);
    Engine engine(*tiny_mtp().forward, cfg, kernels::cpu::make_cpu_sampler());
    check_speculative_outputs(run_together(engine, reqs), plain);
    check_pools_free(engine);
    const EngineStats s = engine.stats();
    check_counted(s, k);
  }
  // Drafts among the first 128 ids only: verification still gives plain decoding's tokens.
  EngineConfig cfg = config(200);
  cfg.speculative = mtp(3);
  cfg.speculative.draft_vocab_size = 128;
  {
    Engine engine(*tiny_mtp().forward, cfg, kernels::cpu::make_cpu_sampler());
    check_speculative_outputs(run_together(engine, reqs), plain);
    check_pools_free(engine);
  }
  // And among a token map's ids (the model loaded with it).
  std::vector<int32_t> map;
  for (int32_t t = 3; t < 1024; t += 7) map.push_back(t);
  auto mapped = qwen35::Model::load(*tiny_mtp().backend, tiny_mtp().dir.path(), {.mtp = true, .mtp_draft_tokens = map});
  Qwen35ForwardModel mapped_forward(*mapped);
  cfg.speculative.draft_vocab_size = 0;
  cfg.speculative.draft_tokens = map;
  Engine engine(mapped_forward, cfg, kernels::cpu::make_cpu_sampler());
  check_speculative_outputs(run_together(engine, reqs), plain);
  check_pools_free(engine);
  CHECK(engine.stats().spec_decode_drafts_total > 0);
}

TEST_CASE("tiny mtp: preemption, prefix caching and a cancellation keep every output", "[engine][tiny][mtp]") {
  const std::vector<Request> reqs = speculative_requests();
  const std::vector<Outcome> plain = plain_run(reqs);
  {
    // 12 blocks of 16 tokens for requests holding about 30 blocks together.
    EngineConfig cfg = config(12, 256, 16, 192);
    cfg.speculative = mtp(3);
    Engine engine(*tiny_mtp().forward, cfg, kernels::cpu::make_cpu_sampler());
    check_speculative_outputs(run_together(engine, reqs), plain);
    CHECK(engine.stats().preemptions_total > 0);
    check_pools_free(engine);
  }
  {
    // The second pass starts from cached prefixes, whose blocks hold the module's K/V too.
    EngineConfig cfg = config(200);
    cfg.speculative = mtp(2);
    cfg.prefix_caching = true;
    cfg.num_snapshots = 32;
    Engine engine(*tiny_mtp().forward, cfg, kernels::cpu::make_cpu_sampler());
    check_speculative_outputs(run_together(engine, reqs), plain);
    check_speculative_outputs(run_together(engine, reqs), plain);
    CHECK(engine.stats().prefix_cache_hits_total > 0);
    CHECK(engine.stats().invariant_violations == 0);
  }
  {
    // A request cancelled while it speculates, beside one that goes on.
    EngineConfig cfg = config(200);
    cfg.speculative = mtp(4);
    Engine engine(*tiny_mtp().forward, cfg, kernels::cpu::make_cpu_sampler());
    auto gone = engine.submit(greedy_request(tiny().prompts[3], 200));
    REQUIRE(gone.ok());
    REQUIRE(gone.handle.wait_for(std::chrono::seconds(60)));
    engine.cancel(gone.handle.id());
    CHECK(collect(gone.handle).finish.has_value());
    check_speculative_outputs(run_together(engine, {reqs[0]}), {plain[0]});
    check_pools_free(engine);
  }
}

TEST_CASE("tiny mtp: the simulated verdict runs the module and counts its drafts", "[engine][tiny][mtp]") {
  EngineConfig cfg = config(200);
  cfg.speculative = mtp(3);
  bench::SimulatedVerdict verdict =
      bench::simulated_verdict(*tiny_mtp().forward, kernels::cpu::make_cpu_sampler(), 0.7, 5);
  Engine engine(*verdict.model, cfg, std::move(verdict.sampler));
  const std::vector<Outcome> got = run_together(engine, speculative_requests());
  for (const Outcome& o : got) CHECK(o.finals == 1);
  check_pools_free(engine);
  const EngineStats s = engine.stats();
  check_counted(s, 3);
  CHECK(s.spec_decode_accepted_tokens_total > 0);
  CHECK(s.spec_decode_accepted_per_position[0] >= s.spec_decode_accepted_per_position[2]);
}

TEST_CASE("tiny mtp: a model loaded without the module refuses the method", "[engine][tiny][mtp]") {
  EngineConfig cfg = config(200);
  cfg.speculative = mtp(2);
  CHECK_THROWS_WITH(Engine(tiny().forward, cfg, kernels::cpu::make_cpu_sampler()),
                    Catch::Contains("speculative method \"mtp\" needs the model's MTP module"));
}
