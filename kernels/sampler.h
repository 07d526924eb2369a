// Sampler: turns one forward step's logits into the next token of every sampling row.
//
// The interface sits beside Backend so that a device backend can sample where the logits
// live; kernels/cpu/sampler.h has the host implementation (what CI runs), kernels/cuda/
// cuda_sampler.h the device one. The engine is handed one (scheduler/engine.h). A row's
// SamplerSettings are the part of a request's sampling parameters (scheduler/
// sampling_params.h, where they are validated) the sampler computes with. The semantics are
// the ones an OpenAI-compatible server promises (vLLM's, where the two differ from HF):
//
//  1. logit_bias is added to the raw logits.
//  2. Penalties: repetition (HF rule, over prompt + generated tokens, each distinct token
//     once: a positive logit is divided by the penalty, a negative one multiplied), then
//     frequency and presence (over generated tokens only: logit -= frequency * count +
//     presence * [count > 0]).
//  3. Greedy (temperature < 1e-5, or top_k == 1): the first index of the largest logit.
//  4. Otherwise: divide by temperature; min_p keeps tokens whose probability is at least
//     min_p times the largest; top_k keeps the k largest; top_p keeps the smallest set of the
//     largest tokens whose renormalised mass reaches top_p; one draw from the request's own
//     generator picks a token from what is left.
//
// Logprobs (the chosen token's, and the top_logprobs best, at most 20) are log-softmax of
// the RAW logits, before bias, penalties, temperature and filtering: the model's own
// distribution, as vLLM V1 reports by default (logprobs_mode=raw_logprobs) and as OpenAI
// documents.
//
// A row may carry a token bitmask (structured outputs, model/grammar/): tokens whose bit is
// clear get -inf before anything else, so they are never chosen and, as in vLLM, the raw
// logprobs are those of the masked row. A seeded request draws only from its own SamplerRng, one draw per non-greedy
// token, so its tokens do not depend on what else shares the batch.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "kernels/tensor.h"

namespace ds::kernels {

inline constexpr int32_t kMaxTopLogprobs = 20;
// Below this temperature sampling is greedy (vLLM's epsilon).
inline constexpr float kGreedyTemperature = 1e-5f;

struct LogitBias {
  int32_t token = 0;
  float bias = 0;
};

// How one row is sampled.
struct SamplerSettings {
  float temperature = 1.0f;  // < 1e-5 = greedy
  int32_t top_k = 0;         // <= 0 = every token
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1 = off
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  std::vector<LogitBias> logit_bias;
  bool logprobs = false;     // report the chosen token's logprob
  int32_t top_logprobs = 0;  // and this many best alternatives (0..20; needs logprobs)

  bool greedy() const { return temperature < kGreedyTemperature || top_k == 1; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

// A request's own random generator (SplitMix64: 64 bits of state, so it travels with the
// request and survives preemption unchanged).
struct SamplerRng {
  uint64_t state = 0;

  explicit SamplerRng(uint64_t seed = 0) : state(seed) {}
  uint64_t next_u64() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double next_unit() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
};

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
  friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

// One row to sample: its settings, its token history and its generator.
struct SampleRow {
  const SamplerSettings* settings = nullptr;
  std::span<const int32_t> prompt;     // repetition penalty
  std::span<const int32_t> generated;  // all penalties
  SamplerRng* rng = nullptr;           // advanced by one draw per non-greedy sample
  // Empty: every token may be chosen. Otherwise bit t % 32 of word t / 32 says whether
  // token t may; tokens past the span's words may not.
  std::span<const uint32_t> allowed = {};
};

struct SampledToken {
  // -1 when the row could not be sampled (a NaN or no finite logit): the request fails.
  int32_t token = -1;
  float logprob = std::numeric_limits<float>::quiet_NaN();  // when settings->logprobs
  std::vector<TokenLogprob> top;  // settings->top_logprobs entries, best first
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  // logits: [rows.size(), vocab] f32 in the memory this sampler reads (host for the CPU
  // sampler), row i belonging to rows[i]. out.size() == rows.size(). Checks that (sampler.cpp)
  // and that every row has settings and a generator, then runs the implementation's
  // do_sample; a mismatch is std::invalid_argument.
  void sample(const Tensor& logits, std::span<const SampleRow> rows, std::span<SampledToken> out);
  // Whether rows may carry token bitmasks (SampleRow::allowed). An engine refuses structured
  // outputs with a sampler that would ignore them.
  virtual bool applies_token_masks() const { return false; }

 protected:
  virtual void do_sample(const Tensor& logits, std::span<const SampleRow> rows, std::span<SampledToken> out) = 0;
};

}  // namespace ds::kernels
