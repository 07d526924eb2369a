#include "scheduler/thinking_budget.h"

#include <stdexcept>

namespace ds::scheduler {

std::string ThinkingSpec::validate(int64_t vocab) const {
  auto in_vocab = [&](int32_t t) { return t >= 0 && t < vocab; };
  if (!in_vocab(close_token)) return "the end-of-thinking token " + std::to_string(close_token) + " is not in the vocabulary";
  if (open_token != -1 && !in_vocab(open_token))
    return "the start-of-thinking token " + std::to_string(open_token) + " is not in the vocabulary";
  if (open_token == close_token) return "the start and end of thinking are the same token";
  if (close_sequence.empty() || close_sequence.front() != close_token)
    return "the sequence that closes a thinking block must start with the end-of-thinking token";
  for (int32_t t : close_sequence)
    if (!in_vocab(t)) return "the thinking close sequence holds token " + std::to_string(t) + ", outside the vocabulary";
  return {};
}

ThinkingTracker::ThinkingTracker(std::shared_ptr<const ThinkingSpec> spec)
    : spec_(std::move(spec)), phase_(Phase::outside) {
  if (!spec_) throw std::invalid_argument("ThinkingTracker: no spec");
  if (spec_->starts_inside) phase_ = Phase::thinking;
}

std::optional<int32_t> ThinkingTracker::forced() const {
  if (phase_ == Phase::closing) return spec_->close_sequence[closed_];
  if (phase_ == Phase::thinking && spec_->limited() && thought_ >= spec_->budget) return spec_->close_sequence.front();
  return std::nullopt;
}

void ThinkingTracker::accept(int32_t token) {
  switch (phase_) {
    case Phase::outside:
      if (may_open_ && token == spec_->open_token) phase_ = Phase::thinking;
      else if (spec_->opens_at_start_only) may_open_ = false;
      return;
    case Phase::thinking:
      if (token == spec_->close_token) {
        // Closed by the model, or the forced close's first token: the rest of the sequence
        // follows only when the budget closed the block.
        const bool forced_close = spec_->limited() && thought_ >= spec_->budget;
        closed_ = 1;
        may_open_ = false;
        phase_ = forced_close && closed_ < spec_->close_sequence.size() ? Phase::closing : Phase::outside;
        return;
      }
      ++thought_;
      return;
    case Phase::closing:
      // A token other than the sequence's next one (a grammar refused it) ends the close there.
      if (token == spec_->close_sequence[closed_]) {
        if (++closed_ == spec_->close_sequence.size()) phase_ = Phase::outside;
        return;
      }
      phase_ = Phase::outside;
      accept(token);
      return;
  }
}

}  // namespace ds::scheduler
