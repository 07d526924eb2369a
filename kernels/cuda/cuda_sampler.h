// The device sampler: kernels/sampler.h's semantics over f32 logits in GPU memory, so only
// the chosen token ids (and requested logprobs) cross to the host.
//
// Per step: the host turns each row's logit_bias and token history into a short list of
// per-token edits (bias, repetition, frequency count: the distinct tokens, as the CPU sampler
// does) and draws the row's uniform from its own SamplerRng (one per non-greedy row); the
// token bitmasks of the rows that carry one (structured outputs) travel in the same staged
// upload, at most ceil(vocab / 32) words a row; rows with edits are copied and edited on the
// device; then one thread block per row finds the token, reading a masked token as -inf (in
// the sampling and in the logprobs alike, as kernels/sampler.h asks; a finite edit of a
// forbidden token changes nothing, so the edits need not know the masks). No sort: greedy is
// an argmax; min_p, top_k and top_p are cuts found by bisection over the order-preserving
// integer image of the floats (counts for top_k, probability mass for top_p), with ties taken
// in token order exactly as the CPU sampler's order (largest first, ties by token id); the
// draw is the same kind of search over the cumulative mass in the CPU sampler's draw order
// when top_k or top_p is set, and in token order otherwise a running sum: per-warp masses of
// 32 slices of the row, then one warp's scan through its slice. Mass sums are in double.
// Logprobs are the raw row's log-softmax; the top n come from n passes that each find the
// next entry in (value desc, id asc) order.
//
// The same seed gives the same tokens as the CPU sampler except where a cumulative sum lands
// within rounding of a cut (the sums run in another order).
#pragma once

#include <memory>

#include "kernels/backend.h"
#include "kernels/sampler.h"

namespace ds::cuda {

// A sampler reading logits from `backend`'s memory (a CUDA backend; its stream orders the
// work after the forward that produced them).
std::unique_ptr<kernels::Sampler> make_cuda_sampler(kernels::Backend& backend);

}  // namespace ds::cuda
