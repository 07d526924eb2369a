// The end of a step (scheduler.h, update()): what the forward computed goes into the
// sequences' bookkeeping, drafts are judged, sampled tokens appended, and the sequences that
// are done give back their blocks and slots.
#include <algorithm>
#include <stdexcept>
#include <utility>

#include "scheduler/scheduler.h"

namespace ds::scheduler {

const StepOutcome& Scheduler::update(const StepPlan& plan, std::span<const kernels::SampledToken> sampled) {
  outcome_.updates.clear();
  outcome_.ended.clear();
  if (plan.sequences.size() != plan.chunks.size())
    throw std::logic_error("scheduler: a plan whose chunks and sequences differ in number");
  if (static_cast<int64_t>(sampled.size()) != plan.num_logit_rows())
    throw std::logic_error("scheduler: " + std::to_string(sampled.size()) + " samples for a plan of " +
                           std::to_string(plan.num_logit_rows()) + " sampling rows");
  // Every chunk's tokens are in the caches, verify chunks' as far as their drafts hold
  // (below); snapshots are asked for before any sequence of the step ends.
  for (size_t i = 0; i < plan.chunks.size(); ++i)
    if (num_drafted(plan.chunks[i]) == 0) complete(plan.chunks[i], *plan.sequences[i]);

  int64_t row = 0;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const SequenceChunk& c = plan.chunks[i];
    if (!samples(c)) continue;
    Sequence& seq = *plan.sequences[i];
    SequenceUpdate& u = outcome_.updates.emplace_back();
    u.seq = &seq;
    u.chunk = i;
    u.first_row = row;
    u.num_draft = num_drafted(c);
    const std::span<const kernels::SampledToken> rows = sampled.subspan(static_cast<size_t>(row),
                                                                          static_cast<size_t>(c.logit_rows));
    row += c.logit_rows;
    // The draft is accepted as far as the target's own samples reproduce it: row i's sample
    // is the token after the pending one and the first i drafted ones, so the first row whose
    // sample differs from its draft gives the last token (greedy: the longest matching
    // prefix; sampled: a drafted token is kept with exactly the probability the target gives
    // it, and a rejected one is replaced by a draw from the target restricted to other
    // tokens -- the rejection sampling of a draft that is a single token).
    while (u.accepted < u.num_draft &&
           rows[static_cast<size_t>(u.accepted)].token == c.tokens[static_cast<size_t>(u.accepted) + 1])
      ++u.accepted;
    if (rows[static_cast<size_t>(u.accepted)].token < 0) {
      u.finish = FinishReason::error;  // no token: the caller says why (grammar, logits)
      outcome_.ended.push_back(retire(seq));
      continue;
    }
    // Tokens kept: the accepted ones and the next, up to the first that finishes the sequence.
    bool ends = false;
    while (u.num_tokens <= u.accepted && !ends) {
      ++u.num_tokens;
      ends = seq.finish.reason(rows[static_cast<size_t>(u.num_tokens - 1)].token, seq.num_generated() + u.num_tokens,
                               seq.num_tokens() + u.num_tokens).has_value();
    }
    if (u.num_draft > 0) complete_verified(c, seq, u.num_tokens - 1);
    for (int32_t k = 0; k < u.num_tokens; ++k) u.finish = append_token(seq, rows[static_cast<size_t>(k)].token);
    if (u.finish) outcome_.ended.push_back(retire(seq));
  }
  return outcome_;
}

void Scheduler::complete(const SequenceChunk& c, Sequence& s) {
  if (c.n_cached != s.num_computed || s.state != SeqState::running)
    throw std::logic_error("scheduler: completing a chunk that is not the sequence's next");
  s.table.append_tokens(c.n_tokens());
  s.num_computed += c.n_tokens();
  if (cache_) record_prefix(c, s);
}

void Scheduler::complete_verified(const SequenceChunk& c, Sequence& s, int32_t accepted) {
  const int32_t num_draft = num_drafted(c);
  if (num_draft < 1 || c.n_cached != s.num_computed || s.state != SeqState::running || accepted < 0 ||
      accepted > num_draft || static_cast<int32_t>(s.row_slots.size()) != num_draft)
    throw std::logic_error("scheduler: completing a verify chunk that is not the sequence's next");
  const int64_t n = 1 + accepted;
  s.table.append_tokens(n);
  s.num_computed += n;
  // The state after row `accepted` is in spare slot `accepted` unless that row is the last.
  if (accepted < num_draft) std::swap(*s.slot, s.spare_slots[static_cast<size_t>(accepted)]);
  const int64_t bs = blocks_.block_size();
  blocks_.free_tail(s.table, static_cast<int32_t>((s.num_computed + bs - 1) / bs));
  s.draft.clear();
  s.verify_tokens.clear();
  s.row_slots.clear();
}

std::optional<FinishReason> Scheduler::append_token(Sequence& s, int32_t token) {
  s.tokens.push_back(token);
  return s.finish.reason(token, s.num_generated(), s.num_tokens());
}

std::unique_ptr<Sequence> Scheduler::retire(Sequence& s) {
  if (s.state == SeqState::running) {
    release_cache(s);
    remove_running(s);
  } else {
    auto it = std::find(waiting_.begin(), waiting_.end(), &s);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  auto node = seqs_.extract(s.id);
  if (node.empty()) throw std::logic_error("scheduler: retiring a sequence it does not hold");
  return std::move(node.mapped());
}

void Scheduler::finish(Sequence& s) { retire(s); }

}  // namespace ds::scheduler
