// The host sampler: kernels/sampler.h's semantics over float32 logits in host memory.
//
// make_cpu_sampler() is what the engine uses. The steps are also exposed one by one so the
// tests can check each against distributions computed by hand:
//   apply_logit_bias + apply_penalties   raw logits -> processed logits (in place)
//   greedy_token                         first index of the largest processed logit
//   filtered_distribution                temperature, min_p, top_k, top_p -> what one draw
//                                        picks from, with renormalised probabilities
//   draw                                 one uniform from the request's generator
//   raw_logprobs                         log-softmax of the raw row: a token's and the best n
//
// A vocabulary of 248k makes a full sort per row the expensive part, so top_k selects with
// nth_element, and top_p finds the nucleus's lowest logit from a histogram of the mass and
// sorts only the tokens above it (a full sort only when the nucleus is the whole vocabulary).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/sampler.h"

namespace ds::kernels::cpu {

std::unique_ptr<Sampler> make_cpu_sampler();

// Reusable memory for the penalty step (sized to the vocabulary on first use).
struct PenaltyScratch {
  std::vector<uint32_t> stamp;  // stamp[token] == epoch: token already penalised this call
  uint32_t epoch = 0;
  std::vector<int32_t> sorted;  // generated tokens, sorted, to count them
};

// logits[t] += bias for every logit_bias entry (repeated tokens add up).
void apply_logit_bias(std::span<float> logits, const SamplerSettings& params);
// Repetition over prompt + generated (each distinct token once), then frequency and
// presence over generated. Tokens outside the vocabulary are ignored.
void apply_penalties(std::span<float> logits, const SamplerSettings& params,
                     std::span<const int32_t> prompt, std::span<const int32_t> generated,
                     PenaltyScratch& scratch);

// out = logits with -inf where the token's bit in `allowed` is clear (sampler.h).
void apply_token_mask(std::span<const float> logits, std::span<const uint32_t> allowed, std::vector<float>& out);

// The first index of the largest value; -1 when the row holds a NaN or no finite value.
int32_t greedy_token(std::span<const float> logits);

struct TokenProb {
  int32_t token = -1;
  double prob = 0;
};

// A candidate of the filtering step: a token and its temperature-scaled logit.
struct Candidate {
  int32_t token;
  float logit;
};

// The distribution a non-greedy row draws from: temperature, min_p, top_k, top_p applied to
// processed logits. out gets the kept tokens with probabilities summing to 1, in draw order:
// largest first (ties by token id) when top_k or top_p is set, token order otherwise.
// Returns false (out empty) when the row holds a NaN or no finite value.
bool filtered_distribution(std::span<const float> logits, const SamplerSettings& params,
                           std::vector<Candidate>& scratch, std::vector<TokenProb>& out);

// Picks from dist (as filtered_distribution leaves it) with u in [0, 1): the first token
// whose cumulative probability exceeds u (the last one when rounding leaves u past the end).
int32_t draw(std::span<const TokenProb> dist, double u);

// log-softmax of the raw row at `token`, and its n best entries (largest first, ties by
// token id) when n > 0.
struct RawLogprobs {
  float chosen = 0;
  std::vector<TokenLogprob> top;
};
RawLogprobs raw_logprobs(std::span<const float> logits, int32_t token, int32_t n);

}  // namespace ds::kernels::cpu
