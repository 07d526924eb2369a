// Thinking budgets: how many tokens a reasoning model may think before its reply is made to
// close the reasoning block, and how many reasoning tokens a reply spent (usage).
//
// A Qwen reasoning model thinks between the <think> and </think> tokens; the prompt may leave
// the reply inside an open block (Qwen3.5's templates) or leave opening it to the model
// (Qwen3's). A ThinkingSpec says, in the tokenizer's ids, what the tags are, where the reply
// starts and what sequence closes a block the way the chat template writes it ("</think>"
// and the line breaks after it), plus the budget.
//
// ThinkingTracker follows one reply token by token:
//
//   outside --<think>--> thinking --</think>--> outside
//                           |
//                           +-- budget spent --> closing (the close sequence, one token a
//                                                step) --> outside
//
// A reply holds one block, as the server's reasoning splitter reads it: once a block has
// closed, a later <think> is text (not counted, never closed by force). Under a grammar
// (opens_at_start_only) only the reply's first token may open the block; after that a <think>
// is what the grammar produced (a JSON string's "<think>"), and forcing </think> into it would
// corrupt the constrained output.
//
// Once `budget` tokens were thought, forced() names the next
// token of the close sequence: the engine makes it the only token its row may sample (a
// one-token mask: the structured-output path), so a forced close composes with grammars (a
// grammar that refuses a forced token after </think> gets its way: the tail of the sequence
// is dropped) and with speculative decoding (a verify row's tracker is advanced through the
// drafts before it, so a draft that thinks past the budget is rejected and the output is plain
// decoding's, token for token). reasoning_tokens() counts the tokens inside the block, the tags
// and forced tokens not included: with a budget it never exceeds the budget.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ds::scheduler {

struct ThinkingSpec {
  int32_t open_token = -1;              // <think>; -1: the reply never opens a block itself
  int32_t close_token = -1;             // </think>
  std::vector<int32_t> close_sequence;  // forced once the budget is spent; starts with close_token
  bool starts_inside = false;           // the prompt leaves the reply inside an open block
  bool opens_at_start_only = false;     // only the reply's first token may open the block (a grammar)
  int64_t budget = -1;                  // reasoning tokens allowed; < 0: no limit (count only)

  bool limited() const { return budget >= 0; }
  // Empty when usable with a vocabulary of `vocab` tokens, else what is wrong.
  std::string validate(int64_t vocab) const;
};

class ThinkingTracker {
 public:
  enum class Phase : uint8_t { outside, thinking, closing };

  explicit ThinkingTracker(std::shared_ptr<const ThinkingSpec> spec);

  // The token the next sample must be (the budget is spent), or none.
  std::optional<int32_t> forced() const;
  // Advances past a generated token.
  void accept(int32_t token);

  Phase phase() const { return phase_; }
  int64_t reasoning_tokens() const { return thought_; }
  const ThinkingSpec& spec() const { return *spec_; }

 private:
  std::shared_ptr<const ThinkingSpec> spec_;
  Phase phase_;
  int64_t thought_ = 0;  // tokens inside blocks so far
  bool may_open_ = true;  // no block has closed (nor, opens_at_start_only, a first token passed)
  size_t closed_ = 0;    // tokens of the close sequence written (closing)
};

}  // namespace ds::scheduler
