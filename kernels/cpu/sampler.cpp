// CpuSampler: the row loop of the host sampler (steps in sampler_penalties.cpp and
// sampler_filter.cpp). Rows are independent; each uses only its own parameters, history and
// generator, which is what makes a seeded request reproducible inside any batch.
#include "kernels/cpu/sampler.h"

namespace ds::kernels::cpu {
namespace {

class CpuSampler final : public Sampler {
 public:
  bool applies_token_masks() const override { return true; }
  void do_sample(const Tensor& logits, std::span<const SampleRow> rows,
                 std::span<SampledToken> out) override {
    const int64_t vocab = logits.dim(1);
    const float* base = logits.data_as<const float>();
    for (size_t i = 0; i < rows.size(); ++i) {
      const SampleRow& row = rows[i];
      std::span<const float> raw(base + static_cast<int64_t>(i) * vocab, static_cast<size_t>(vocab));
      out[i] = sample_row(raw, row);
    }
  }

 private:
  SampledToken sample_row(std::span<const float> raw, const SampleRow& row) {
    const SamplerSettings& p = *row.settings;
    SampledToken result;
    if (!row.allowed.empty()) {
      apply_token_mask(raw, row.allowed, masked_);
      raw = masked_;
    }
    const bool plain = p.logit_bias.empty() && !p.has_penalties();
    if (p.greedy() && plain) {
      result.token = greedy_token(raw);
    } else {
      std::span<const float> x = raw;
      if (!plain) {
        work_.assign(raw.begin(), raw.end());
        apply_logit_bias(work_, p);
        apply_penalties(work_, p, row.prompt, row.generated, penalty_);
        x = work_;
      }
      if (p.greedy()) {
        result.token = greedy_token(x);
      } else if (filtered_distribution(x, p, candidates_, dist_)) {
        result.token = draw(dist_, row.rng->next_unit());
      }
    }
    if (result.token >= 0 && p.logprobs) {
      RawLogprobs lp = raw_logprobs(raw, result.token, p.top_logprobs);
      result.logprob = lp.chosen;
      result.top = std::move(lp.top);
    }
    return result;
  }

  std::vector<float> work_, masked_;
  PenaltyScratch penalty_;
  std::vector<Candidate> candidates_;
  std::vector<TokenProb> dist_;
};

}  // namespace

std::unique_ptr<Sampler> make_cpu_sampler() { return std::make_unique<CpuSampler>(); }

}  // namespace ds::kernels::cpu
