// ForwardBatch: what one engine step asks of the model.
//
// Each sequence brings a chunk of new tokens (one decode token, or a prefill chunk of any
// length); decode and prefill chunks mix freely in one batch. For each chunk the caller has
// already made room in the sequence's BlockTable for all its tokens (capacity >= n_cached +
// tokens.size()); forward writes their K/V there and advances the sequence's DeltaNet state
// slot, but it does not change the table's bookkeeping: the caller calls
// BlockTable::append_tokens afterwards.
//
// A state slot carries the DeltaNet history, so n_cached must equal the number of tokens
// fed through that slot since it was acquired (or reset): a chunk continues the state it
// finds. Two chunks of one batch may not share a slot.
//
// Speculative decoding verifies a chunk of drafted tokens and keeps only a prefix of it: such
// a chunk names row-state slots, which receive the DeltaNet state after each of its first
// rows (kernels/batch_plan.h), so the state after any accepted prefix exists without a
// second pass.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/batch_plan.h"
#include "kvcache/block_table.h"
#include "kvcache/state_pool.h"

namespace ds::qwen35 {

// A sequence's chunk of a step, as the model runs it (the scheduler plans it; the backend
// sees kernels::SequenceChunk).
struct SequenceChunk {
  std::span<const int32_t> tokens;                 // new token ids, >= 1 (caller's memory)
  int64_t n_cached = 0;                            // tokens already cached = first new position
  const kvcache::BlockTable* block_table = nullptr;  // the sequence's table (not null)
  kvcache::SlotId state_slot = -1;                 // its DeltaNet state slot
  // Logits for the last `logit_rows` tokens of the chunk: 0 = none (a prefill chunk that is
  // not the prompt's last), 1 = the chunk's last token (what sampling needs), up to
  // tokens.size() = every position (reference checks, prompt logprobs).
  int32_t logit_rows = 0;
  // Slots that get the state after rows 0, 1, ... (fewer than tokens.size(); none = empty).
  std::span<const kvcache::SlotId> row_state_slots = {};
  // Rows whose state also goes to a slot: prefix caching's snapshots inside a prefill chunk
  // (ascending, each < tokens.size() - 1; kernels/batch_plan.h).
  std::span<const kernels::SnapshotRow> snapshot_rows = {};
};

struct ForwardBatch {
  std::vector<SequenceChunk> seqs;

  int64_t num_tokens() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += static_cast<int64_t>(s.tokens.size());
    return n;
  }
  int64_t num_logit_rows() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += s.logit_rows;
    return n;
  }
};

}  // namespace ds::qwen35
