// ForwardBatch: what one engine step asks of the model.
//
// Each sequence brings a chunk of new tokens (one decode token, or a prefill chunk of any
// length); decode and prefill chunks mix freely in one batch. For each chunk the caller has
// already made room in the sequence's block table for all its tokens (block_ids hold
// n_cached + tokens.size() tokens); forward writes their K/V there and advances the
// sequence's DeltaNet state slot, but it keeps no bookkeeping of its own: the caller's
// BlockTable::append_tokens follows.
//
// A state slot carries the DeltaNet history, so n_cached must equal the number of tokens
// fed through that slot since it was acquired (or reset): a chunk continues the state it
// finds. Two chunks of one batch may not share a slot.
//
// Multimodal prompts (docs/vision.md): a chunk's image-pad rows take an image's encoder output
// instead of the token embedding (`embeddings`), and its rows carry M-RoPE positions: the
// (t, h, w) of its first rows where the prompt's images shape them, position + rope_delta on
// all three axes for the rest (kernels/batch_plan.h).
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
#include "kernels/tensor.h"

namespace ds::qwen35 {

// A sequence's chunk of a step (kernels/batch_plan.h: the one struct the scheduler plans, the
// model runs and the backend lays out). Its M-RoPE positions and rope_delta are there too.
using SequenceChunk = kernels::SequenceChunk;

// Rows [row, row + embeddings.dim(0)) of a chunk fed `embeddings` ([n, hidden] f32 in the
// backend's memory; typically rows of an image's encoder output) instead of their tokens'.
struct EmbeddingRows {
  int64_t row = 0;
  kernels::Tensor embeddings;
};

struct ForwardBatch {
  std::vector<SequenceChunk> seqs;
  // Multimodal prompts (see above): empty, or per chunk the rows that take other embeddings
  // (ascending, inside the chunk, not overlapping; the caller's memory).
  std::vector<std::span<const EmbeddingRows>> embeddings;

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
