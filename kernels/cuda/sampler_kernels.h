// The device sampler's kernels (cuda_sampler.h) and what its host side (cuda_sampler.cpp)
// hands them: per row a descriptor, per edited token an edit, per masked row its token
// bitmask, and a result per row.
//
// Internal to kernels/cuda; plain C++ (no CUDA headers). Streams are `void*`.
#pragma once

#include <cstdint>

#include "kernels/sampler.h"

namespace ds::cuda::sampler {

struct RowDesc {
  int32_t sample;    // 0 = greedy
  int32_t use_work;  // read the edited copy
  int32_t top_k;     // <= 0: off
  int32_t n_top;     // -1: no logprobs; else 0..20 alternatives
  float temperature, top_p, min_p, pad;
  double u;          // the row's uniform (non-greedy rows)
  // The row's token bitmask (kernels/sampler.h): mask_words words from word mask_offset of
  // the step's mask buffer; tokens past them are not allowed. mask_offset < 0: no mask.
  int64_t mask_offset;
  int64_t mask_words;
};

struct Edit {
  int32_t row, token;
  int32_t bias_begin, bias_n;  // biases to add, in the request's order
  int32_t repetition;          // apply the repetition penalty once
  float count;                 // occurrences among generated tokens (frequency / presence)
  float rep_penalty, frequency, presence, pad;
};

struct RowResult {
  int32_t token;
  float logprob;
  int32_t top_ids[kernels::kMaxTopLogprobs];
  float top_lp[kernels::kMaxTopLogprobs];
};

// Copies the edited rows (edit_rows[0, n)) of logits [rows, vocab] into work and applies
// the edits to them.
void launch_edits(const float* logits, float* work, const int32_t* edit_rows, int32_t n_edit_rows, const Edit* edits,
                  int32_t n_edits, const float* biases, int64_t vocab, void* stream);
// One block per row: its token (argmax, or the cuts and the draw), then its raw logprobs.
// Rows with use_work read work instead of logits. A row with a mask reads -inf for every token
// the mask forbids (masks: the step's mask words, null when no row has one), in the sampling
// and in the logprobs alike; the edits need not know, since a finite edit leaves -inf as it is.
void launch_sample(const float* logits, const float* work, const RowDesc* descs, const uint32_t* masks, int32_t n_rows,
                   int64_t vocab, RowResult* results, void* stream);

}  // namespace ds::cuda::sampler
