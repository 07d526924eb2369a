#include "scheduler/mtp_drafter.h"

#include <algorithm>
#include <stdexcept>

namespace ds::scheduler {

void MtpDrafter::propose(RequestId id, std::span<const int32_t> tokens, int64_t, int32_t max_tokens,
                         std::vector<int32_t>& out) {
  out.clear();
  const auto it = drafts_.find(id);
  // A draft made before the sequence last changed (a preemption) does not follow its tokens.
  if (it == drafts_.end() || it->second.pending != static_cast<int64_t>(tokens.size()) - 1 || max_tokens < 1) return;
  out.push_back(it->second.token);
  if (it->second.step == steps_) out.resize(static_cast<size_t>(max_tokens), it->second.token);  // extend() chains
}

void MtpDrafter::finished(RequestId id, std::span<const int32_t>, int64_t, bool) { drafts_.erase(id); }

void MtpDrafter::argmax(const kernels::Tensor& logits, size_t rows) {
  rows_.assign(rows, kernels::SampleRow{&greedy_, {}, {}, &rng_});
  sampled_.assign(rows, kernels::SampledToken{});
  if (rows > 0) sampler_.sample(logits, rows_, sampled_);
  // Over a token map, column i is the map's i-th id.
  if (!draft_tokens_.empty())
    for (kernels::SampledToken& s : sampled_)
      if (s.token >= 0) s.token = draft_tokens_[static_cast<size_t>(s.token)];
}

void MtpDrafter::catch_up(std::span<const Computed> computed) {
  batch_.seqs.clear();
  batch_.source = qwen35::MtpSource::target;
  size_t wanted = 0;
  for (const Computed& c : computed) {
    if (c.next_tokens.empty()) continue;
    batch_.seqs.push_back({c.next_tokens, c.start, c.block_ids, c.slot, c.hidden_row, c.goes_on});
    wanted += c.goes_on ? 1 : 0;
  }
  if (batch_.seqs.empty()) return;
  const kernels::Tensor& logits = model_.forward_mtp(batch_);
  ++steps_;
  argmax(logits, wanted);
  size_t sample = 0;
  int64_t row = 0;
  for (const Computed& c : computed) {
    if (c.next_tokens.empty()) continue;
    const auto n = static_cast<int64_t>(c.next_tokens.size());
    row += n;
    if (!c.goes_on) {
      drafts_.erase(c.id);
      continue;
    }
    Draft& d = drafts_[c.id];
    d.token = sampled_[sample++].token;
    d.pending = c.start + n;
    d.step = steps_;
    d.row = row - 1;
    if (d.token < 0) drafts_.erase(c.id);  // no finite logit: no draft
  }
}

void MtpDrafter::extend(const StepPlan& plan) {
  // Row j of the previous chain step for each chunk that chains (index into the plan).
  const std::vector<SequenceChunk>& chunks = plan.chunks;
  std::vector<size_t> chain;
  std::vector<int64_t> rows;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (num_drafted(chunks[i]) < 2) continue;
    const auto it = drafts_.find(plan.sequences[i]->id);
    if (it == drafts_.end() || it->second.step != steps_) continue;  // placeholders stay: verification drops them
    chain.push_back(i);
    rows.push_back(it->second.row);
  }
  std::vector<int32_t> tokens;
  for (int32_t j = 1; !chain.empty(); ++j) {
    // Step j drafts token j (0-based) at position start + j - 1 from draft j - 1.
    batch_.seqs.clear();
    batch_.source = qwen35::MtpSource::module;
    tokens.resize(chain.size());
    for (size_t k = 0; k < chain.size(); ++k) {
      const SequenceChunk& c = chunks[chain[k]];
      tokens[k] = plan.sequences[chain[k]]->draft[static_cast<size_t>(j - 1)];
      batch_.seqs.push_back({std::span<const int32_t>(&tokens[k], 1), c.n_cached + j - 1, c.block_ids, c.state_slot,
                             rows[k], true});
    }
    const kernels::Tensor& logits = model_.forward_mtp(batch_);
    ++steps_;
    argmax(logits, chain.size());
    std::vector<size_t> next;
    std::vector<int64_t> next_rows;
    for (size_t k = 0; k < chain.size(); ++k) {
      Sequence& s = *plan.sequences[chain[k]];
      const int32_t t = sampled_[k].token;
      if (t < 0) continue;  // no finite logit: the placeholders stay
      // The chunk's tokens are the sequence's verify tokens: the forward reads this draft.
      s.draft[static_cast<size_t>(j)] = t;
      s.verify_tokens[static_cast<size_t>(j) + 1] = t;
      if (j + 1 < num_drafted(chunks[chain[k]])) {
        next.push_back(chain[k]);
        next_rows.push_back(static_cast<int64_t>(k));
      }
    }
    chain.swap(next);
    rows.swap(next_rows);
  }
}

}  // namespace ds::scheduler
