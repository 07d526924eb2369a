// MtpDrafter: drafts with the checkpoint's own multi-token-prediction module
// (speculative_config.h, "mtp"; the module: model/qwen35/mtp.h).
//
// The module needs the target's hidden states, so it runs beside the target rather than
// from token history alone. The engine calls it at two points of a step:
//  * catch_up(), after a forward and the judging of its samples: for every position the
//    forward computed (prefill chunks, decodes, the accepted part of verify chunks -- and
//    those of requests that just ended, so the blocks they leave in the prefix cache hold
//    the module's K/V too) the module's step over (token at p + 1, target hidden state at p)
//    writes its K/V; the last position of a sequence that goes on gives its first draft, the
//    argmax of the module's logits.
//  * extend(), after planning: propose() gave a verify chunk its first draft followed by
//    placeholders; the chain fills drafts 2..k, each step embedding the previous draft and
//    reading the module's own output for the position before (positions inside the chunk's
//    blocks, which planning has just reserved; the target's verify step then writes the
//    real K/V there, and catch_up the module's). Drafts are written into the sequence's
//    draft and verify tokens before the forward reads them.
// Verification judges MTP drafts as any others, so output never depends on them.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/sampler.h"
#include "scheduler/drafter.h"
#include "scheduler/forward_model.h"
#include "scheduler/scheduler.h"

namespace ds::scheduler {

class MtpDrafter final : public Drafter {
 public:
  // The positions one sequence computed in a forward: [start, start + next_tokens.size()).
  struct Computed {
    RequestId id = 0;
    std::vector<int32_t> block_ids;    // its table (copied: a request that ended has none)
    kvcache::SlotId slot = -1;         // its state slot (see qwen35::MtpChunk)
    int64_t start = 0;
    std::vector<int32_t> next_tokens;  // the token at p + 1 for each position p
    int64_t hidden_row = 0;            // the forward's row of position `start`
    bool goes_on = false;              // wants a draft (the request did not end)
  };

  // model (with has_mtp()) and sampler (the engine's: it reads the model's logits) outlive it.
  // draft_vocab: drafts only among token ids [0, draft_vocab) (0: all;
  // SpeculativeConfig::draft_vocab_size); draft_tokens: only among these (the token map the
  // model was loaded with, in its order; SpeculativeConfig::draft_tokens).
  MtpDrafter(ForwardModel& model, kernels::Sampler& sampler, int64_t draft_vocab = 0,
             std::vector<int32_t> draft_tokens = {})
      : model_(model), sampler_(sampler), draft_tokens_(std::move(draft_tokens)) {
    greedy_.temperature = 0;
    batch_.vocab = draft_vocab;
    batch_.draft_tokens = !draft_tokens_.empty();
  }

  // The first draft from the sequence's latest catch_up, then max_tokens - 1 placeholders
  // for extend() when the module's output of that step is still there to chain from.
  void propose(RequestId id, std::span<const int32_t> tokens, int64_t prompt_len, int32_t max_tokens,
               std::vector<int32_t>& out) override;
  void finished(RequestId id, std::span<const int32_t> tokens, int64_t prompt_len, bool completed) override;

  void catch_up(std::span<const Computed> computed);
  void extend(const StepPlan& plan);
  // Forgets every draft (after a failed module step).
  void reset() { drafts_.clear(); }

 private:
  struct Draft {
    int32_t token = -1;
    int64_t pending = 0;   // the position of the token it follows (the sequence's pending one)
    uint64_t step = 0;     // the module step that made it
    int64_t row = 0;       // its row in that step's output
  };
  // Greedy samples of the module's logits, one per row.
  void argmax(const kernels::Tensor& logits, size_t rows);

  ForwardModel& model_;
  kernels::Sampler& sampler_;
  std::vector<int32_t> draft_tokens_;  // a token map's ids: the module's logit columns
  std::unordered_map<RequestId, Draft> drafts_;
  uint64_t steps_ = 0;  // module steps run
  // Scratch.
  kernels::SamplerSettings greedy_;
  kernels::SamplerRng rng_;
  std::vector<kernels::SampleRow> rows_;
  std::vector<kernels::SampledToken> sampled_;
  qwen35::MtpBatch batch_;
};

}  // namespace ds::scheduler
