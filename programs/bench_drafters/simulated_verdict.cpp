#include "programs/bench_drafters/simulated_verdict.h"

#include <limits>
#include <stdexcept>

#include "scheduler/forwarding_model.h"

namespace ds::bench {

namespace {

// What the model wrapper saw of the last target forward, for the sampler wrapper.
struct VerdictState {
  double acceptance = 1;
  kernels::SamplerRng rng;
  bool pending = false;  // a target forward whose rows the engine has not sampled yet
  struct Chunk {
    int32_t logit_rows = 0;
    std::vector<int32_t> drafts;  // a verify chunk's drafted tokens (its tokens after the first)
  };
  std::vector<Chunk> chunks;
  int64_t rows = 0;

  void apply(std::span<kernels::SampledToken> out) {
    if (!pending || static_cast<int64_t>(out.size()) != rows) return;
    pending = false;
    size_t row = 0;
    for (const Chunk& c : chunks) {
      if (c.logit_rows > 1) {
        size_t kept = 0;
        while (kept < c.drafts.size() && rng.next_unit() < acceptance) ++kept;
        for (size_t i = 0; i < kept; ++i) {
          kernels::SampledToken& st = out[row + i];
          st.token = c.drafts[i];
          st.logprob = std::numeric_limits<float>::quiet_NaN();
          st.top.clear();
        }
      }
      row += static_cast<size_t>(c.logit_rows);
    }
  }
};

// Forwards everything; remembers each target forward's chunks for VerdictSampler.
class VerdictModel final : public scheduler::ForwardingModel {
 public:
  VerdictModel(scheduler::ForwardModel& inner, std::unique_ptr<scheduler::ForwardModel> owned,
               std::shared_ptr<VerdictState> state)
      : ForwardingModel(inner), owned_(std::move(owned)), state_(std::move(state)) {}
  const kernels::Tensor& forward(const qwen35::ForwardBatch& batch) override {
    state_->pending = false;
    const kernels::Tensor& logits = inner_.forward(batch);
    state_->chunks.clear();
    state_->rows = 0;
    for (const qwen35::SequenceChunk& c : batch.seqs) {
      VerdictState::Chunk& k = state_->chunks.emplace_back();
      k.logit_rows = c.logit_rows;
      if (c.logit_rows > 1) k.drafts.assign(c.tokens.begin() + 1, c.tokens.end());
      state_->rows += c.logit_rows;
    }
    state_->pending = true;
    return logits;
  }
  const kernels::Tensor& forward_mtp(const qwen35::MtpBatch& batch) override {
    state_->pending = false;  // the MTP drafter's own sampling follows: not a verdict
    return inner_.forward_mtp(batch);
  }

 private:
  std::unique_ptr<scheduler::ForwardModel> owned_;  // inner_, when the wrapper owns it
  std::shared_ptr<VerdictState> state_;
};

class VerdictSampler final : public kernels::Sampler {
 public:
  VerdictSampler(std::unique_ptr<kernels::Sampler> inner, std::shared_ptr<VerdictState> state)
      : inner_(std::move(inner)), state_(std::move(state)) {}
  bool applies_token_masks() const override { return inner_->applies_token_masks(); }

 protected:
  void do_sample(const kernels::Tensor& logits, std::span<const kernels::SampleRow> rows,
                 std::span<kernels::SampledToken> out) override {
    inner_->sample(logits, rows, out);
    state_->apply(out);
  }

 private:
  std::unique_ptr<kernels::Sampler> inner_;
  std::shared_ptr<VerdictState> state_;
};

SimulatedVerdict wrap(scheduler::ForwardModel& model, std::unique_ptr<scheduler::ForwardModel> owned,
                      std::unique_ptr<kernels::Sampler> sampler, double acceptance, uint64_t seed) {
  if (!(acceptance >= 0 && acceptance <= 1)) throw std::invalid_argument("acceptance_rate must be in [0, 1]");
  if (!sampler) throw std::invalid_argument("simulated_verdict: no sampler");
  auto state = std::make_shared<VerdictState>();
  state->acceptance = acceptance;
  state->rng = kernels::SamplerRng(seed);
  SimulatedVerdict v;
  v.model = std::make_unique<VerdictModel>(model, std::move(owned), state);
  v.sampler = std::make_unique<VerdictSampler>(std::move(sampler), state);
  return v;
}

}  // namespace

SimulatedVerdict simulated_verdict(scheduler::ForwardModel& model, std::unique_ptr<kernels::Sampler> sampler,
                                   double acceptance, uint64_t seed) {
  return wrap(model, nullptr, std::move(sampler), acceptance, seed);
}

SimulatedVerdict simulated_verdict(std::unique_ptr<scheduler::ForwardModel> model,
                                   std::unique_ptr<kernels::Sampler> sampler, double acceptance, uint64_t seed) {
  if (!model) throw std::invalid_argument("simulated_verdict: no model");
  scheduler::ForwardModel& inner = *model;
  return wrap(inner, std::move(model), std::move(sampler), acceptance, seed);
}

}  // namespace ds::bench
