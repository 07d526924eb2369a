// The step's sampling and what is published from it (engine_core.h): a row per sampling
// chunk (every row of a verify chunk), each with its request's settings, generator and token
// mask; then the tokens the scheduler kept (Scheduler::update) as events.
#include <algorithm>
#include <exception>
#include <optional>
#include <spdlog/spdlog.h>

#include "scheduler/engine_core.h"

namespace ds::scheduler {

void Engine::Core::sample(const StepPlan& plan, const kernels::Tensor& logits) {
  const auto n_rows = static_cast<size_t>(plan.num_logit_rows());
  rows_.clear();
  unsampled_.clear();
  row_rngs_.resize(n_rows);
  if (forced_masks_.size() < n_rows) forced_masks_.resize(n_rows);
  size_t chunk = 0;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const SequenceChunk& c = plan.chunks[i];
    if (!samples(c)) continue;
    const Sequence& seq = *plan.sequences[i];
    Live& l = live_.at(seq.id);
    const std::span<const int32_t> generated = seq.generated();
    const int32_t num_draft = num_drafted(c);
    if (histories_.size() <= chunk) histories_.resize(chunk + 1);
    std::vector<int32_t>& history = histories_[chunk++];
    history.clear();
    if (num_draft > 0 && l.sampling.has_penalties()) {
      // Row i's penalties count the drafted tokens before it as generated.
      history.assign(generated.begin(), generated.end());
      history.insert(history.end(), seq.draft.begin(), seq.draft.end());
    }
    for (int32_t r = 0; r <= num_draft; ++r) {
      kernels::SampleRow row{&l.sampling, seq.prompt(), generated, &l.rng};
      if (num_draft > 0) {
        // Row r draws what the r-th token from now would draw without speculation: a copy of
        // the request's generator past the draws of the rows before it (one per row when
        // not greedy). The request's own generator advances once the accepted count is known.
        const size_t k = rows_.size();
        row_rngs_[k] = r == 0 ? l.rng : row_rngs_[k - 1];
        if (r > 0 && !l.sampling.greedy()) row_rngs_[k].next_u64();
        row.rng = &row_rngs_[k];
        if (!history.empty())
          row.generated = std::span<const int32_t>(history).first(generated.size() + static_cast<size_t>(r));
      }
      if (!fill_token_mask(l, seq, r, rows_.size(), row))
        unsampled_.emplace_back(seq.id, "the output's grammar allows no next token");
      rows_.push_back(row);
    }
  }
  sampled_.assign(rows_.size(), kernels::SampledToken{});
  try {
    sampler_->sample(logits, rows_, sampled_);
  } catch (const std::exception& e) {
    counters_.last_error = e.what();
    spdlog::error("engine: sampling failed for {} rows: {}", rows_.size(), e.what());
    sampled_.assign(rows_.size(), kernels::SampledToken{});
    for (size_t i = 0; i < plan.chunks.size(); ++i)
      if (samples(plan.chunks[i])) unsampled_.emplace_back(plan.sequences[i]->id, std::string("sampling error: ") + e.what());
  }
  // A row whose request cannot go on gets no token: the scheduler ends it (publish() says why).
  size_t row = 0;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const SequenceChunk& c = plan.chunks[i];
    const RequestId id = plan.sequences[i]->id;
    const bool failed = std::any_of(unsampled_.begin(), unsampled_.end(), [&](const auto& f) { return f.first == id; });
    for (int32_t r = 0; r < c.logit_rows; ++r, ++row)
      if (failed) sampled_[row].token = -1;
  }
}

bool Engine::Core::fill_token_mask(Live& l, const Sequence& seq, int32_t r, size_t mask_slot,
                                   kernels::SampleRow& row) {
  // A constrained request never has a draft (propose_drafts()): its one row carries the mask.
  if (l.constrained) {
    if (!fill_grammar_mask(l)) return false;
    row.allowed = l.mask;
  }
  if (l.thinking) force_thinking(l, seq, r, mask_slot, row);
  return true;
}

void Engine::Core::force_thinking(Live& l, const Sequence& seq, int32_t r, size_t mask_slot,
                                  kernels::SampleRow& row) {
  ThinkingTracker t = *l.thinking;
  for (int32_t j = 0; j < r; ++j) t.accept(seq.draft[static_cast<size_t>(j)]);
  const std::optional<int32_t> token = t.forced();
  if (!token) return;
  const auto word = static_cast<size_t>(*token) / 32;
  const uint32_t bit = 1u << (static_cast<uint32_t>(*token) % 32);
  // Under a grammar that refuses the forced token the grammar's mask stands (the tracker then
  // drops the rest of its close sequence).
  if (!row.allowed.empty() && (word >= row.allowed.size() || (row.allowed[word] & bit) == 0)) return;
  std::vector<uint32_t>& m = forced_masks_[mask_slot];
  m.assign(word + 1, 0u);  // the sampler treats the words past the span as all clear
  m[word] = bit;
  row.allowed = m;
}

bool Engine::Core::fill_grammar_mask(Live& l) {
  const auto t0 = Clock::now();
  const size_t words = static_cast<size_t>(l.matcher->grammar().vocabulary().mask_words());
  l.mask.resize(words);
  l.matcher->fill_next_token_bitmask(l.mask);
  counters_.grammar_mask_seconds_total += seconds_between(t0, Clock::now());
  ++counters_.grammar_masks_total;
  return std::any_of(l.mask.begin(), l.mask.end(), [](uint32_t w) { return w != 0; });
}

bool Engine::Core::advance_grammar(Live& l, int32_t token) {
  if (!l.matcher) return true;
  if (!l.constrained) {
    if (token == l.grammar_after) l.constrained = true;
    return true;
  }
  return l.matcher->accept_token(token);
}

void Engine::Core::publish(const StepOutcome& outcome) {
  const auto now = Clock::now();
  for (const SequenceUpdate& u : outcome.updates) publish_update(u, now);
}

void Engine::Core::publish_update(const SequenceUpdate& u, Clock::time_point now) {
  const Sequence& seq = *u.seq;
  const RequestId id = seq.id;
  // The sequence is the outcome's when update() ended it, else still the scheduler's.
  const Sequence* ended = u.finish ? &seq : nullptr;
  Live& l = live_.at(id);
  if (u.num_tokens == 0) {
    const auto why = std::find_if(unsampled_.begin(), unsampled_.end(), [&](const auto& f) { return f.first == id; });
    fail_request(id, why != unsampled_.end() ? why->second : "the model produced no finite logits for this request",
                 ended);
    return;
  }
  if (u.num_draft > 0) {
    ++counters_.spec_decode_drafts_total;
    counters_.spec_decode_draft_tokens_total += u.num_draft;
    counters_.spec_decode_accepted_tokens_total += u.accepted;
    for (int32_t i = 0; i < u.accepted && i < num_speculative_tokens_; ++i)
      ++counters_.spec_decode_accepted_per_position[static_cast<size_t>(i)];
    // The rows drew from copies of the request's generator: it moves past the kept ones.
    if (!l.sampling.greedy())
      for (int32_t i = 0; i < u.num_tokens; ++i) l.rng.next_u64();
  }
  for (int32_t i = 0; i < u.num_tokens; ++i) {
    kernels::SampledToken& st = sampled_[static_cast<size_t>(u.first_row + i)];
    if (!advance_grammar(l, st.token)) {
      fail_request(id, "internal error: the grammar refused the token its own mask allowed", ended);
      return;
    }
    if (l.thinking) l.thinking->accept(st.token);
    ++counters_.generated_tokens_total;
    ++l.metrics.generated_tokens;
    if (!l.has_token) {
      l.has_token = true;
      l.metrics.first_token = now;
    }
    RequestEvent e;
    e.token = st.token;
    e.cached_tokens = seq.cached_tokens;
    e.logprob = l.sampling.logprobs ? st.logprob : 0.0f;
    e.top_logprobs = std::move(st.top);
    e.time = now;
    if (i + 1 == u.num_tokens && u.finish) {
      e.finish = u.finish;
      if (*u.finish == FinishReason::stop) e.stop_token = st.token;
      end_request(id, std::move(e), ended);  // the sequence is gone: this was its last token
      return;
    }
    outbox_.emplace_back(l.stream, std::move(e));
  }
}

}  // namespace ds::scheduler
