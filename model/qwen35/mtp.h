// MtpBatch: what one step of the multi-token-prediction (MTP) module asks of the model
// (Model::forward_mtp; the module's weights: weights.h, MtpWeights).
//
// The module predicts the token two places ahead. At position p it reads the embedding of
// the token at p + 1 and a hidden state for position p, each through its own zero-centred
// RMSNorm, then fc over [embedding; hidden] (embedding first), one full-attention decoder
// layer and its final norm; lm_head of that output gives the logits of the token at p + 2.
// The hidden state is the target model's at p -- its last layer's output after the final
// norm, what the target's own lm_head reads -- or, to draft further ahead, the module's own
// output at p - 1 (the chain: draft i + 1 embeds draft i and reads the module's output that
// predicted it). vLLM's and SGLang's Qwen3.5/Qwen3-Next MTP run the same way.
//
// The layer's attention has its own paged K/V: one more pool after the model's full-attention
// layers (Model::cache_geometry counts it), indexed by the sequences' own block tables, so
// the module's K/V of position p sits where the target's does. It must be written for every
// position the target computes (prefill chunks and accepted tokens of verify steps), each
// once the token at p + 1 is known; the chain's positions are overwritten when the target
// computes them. A step's chunks name their hidden states as a row range of the source:
// MtpSource::target, the rows of the last forward() (valid until the next one), or
// MtpSource::module, the rows of the last forward_mtp().
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kvcache/state_pool.h"

namespace ds::qwen35 {

enum class MtpSource : uint8_t {
  target,  // the last forward()'s rows: the target's hidden states after the final norm
  module,  // the last forward_mtp()'s rows: the module's output after its norm
};

// A sequence's positions [n_cached, n_cached + tokens.size()) in one MTP step.
struct MtpChunk {
  std::span<const int32_t> tokens;     // per position p: the token at p + 1 (caller's memory)
  int64_t n_cached = 0;                // the first position
  std::span<const int32_t> block_ids;  // the sequence's block table: room for every position
  // The module keeps no recurrent state, but its step is planned like any other: a slot in
  // range that no other chunk of the step names (the sequence's own).
  kvcache::SlotId state_slot = -1;
  int64_t hidden_row = 0;  // the source row of its first position's hidden state
  bool logits = false;     // the logits of its last position (the next draft)
};

struct MtpBatch {
  std::vector<MtpChunk> seqs;
  MtpSource source = MtpSource::target;
  // The logits cover token ids [0, vocab) (0: the whole vocabulary; rounded up to the lm_head's
  // row blocks where it has them; see SpeculativeConfig::draft_vocab_size).
  int64_t vocab = 0;
  // Instead: logits over the token map the model was loaded with (LoadOptions::
  // mtp_draft_tokens), column i for its i-th id.
  bool draft_tokens = false;
};

}  // namespace ds::qwen35
