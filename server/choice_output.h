// ChoiceOutput: one choice's way from engine token events to what the client sees.
//
//   token ids -> IncrementalDetokenizer (UTF-8 safe; special tokens skipped by default)
//             -> StopStringMatcher       (stop strings, never shown in part)
//             -> ReasoningSplitter       (chat: <think>...</think> -> reasoning)
//             -> ToolCallParser          (chat with tools: <tool_call> -> tool_calls)
//             -> ChoiceDelta             (what one SSE chunk or the final message adds)
//
// Streaming and non-streaming responses run the same pipeline (a non-streaming reply is the
// sum of its deltas), so the two always agree. The eos token that ends a generation is not
// shown; a stop_token_ids token is shown like any other token (vLLM's rule: unless it is
// special). When a stop string matches, the choice is finished (reason "stop") and the
// caller cancels the engine request; events that still arrive for it are ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/sampler.h"
#include "model/tokenizer/incremental_detokenizer.h"
#include "model/tokenizer/tokenizer.h"
#include "scheduler/request.h"
#include "scheduler/thinking_budget.h"
#include "server/json.h"
#include "server/reasoning_splitter.h"
#include "server/stop_matcher.h"
#include "server/tool_call_parser.h"

namespace ds::server {

struct ChoiceOptions {
  bool skip_special = true;
  std::vector<std::string> stop;
  bool include_stop = false;
  bool split_reasoning = false;  // chat, unless thinking is off
  bool reports_reasoning = false;  // chat: usage gives its reasoning tokens (0 with thinking off)
  bool start_in_reasoning = false;
  bool reasoning_at_start_only = false;  // under a grammar: reasoning_splitter.h
  bool parse_tool_calls = false;  // chat with tools and tool_choice != none
  Json tools;           // for parameter types
  bool logprobs = false;
  std::vector<int32_t> eos_ids;   // hidden when they end the generation
  // Chat: the reply's reasoning tags and budget (the engine enforces the budget; the choice
  // counts reasoning tokens with the same tracker). Null: counted from the split text.
  std::shared_ptr<const scheduler::ThinkingSpec> thinking;
};

// One generated token's log-probabilities, for the response's logprobs.
struct TokenLogprobInfo {
  int32_t token = -1;
  float logprob = 0;
  std::vector<kernels::TokenLogprob> top;
  size_t text_offset = 0;  // bytes of output text before this token's text
};

struct ChoiceDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> tool_calls;
  std::vector<TokenLogprobInfo> logprobs;
  bool empty() const {
    return content.empty() && reasoning.empty() && tool_calls.empty() && logprobs.empty();
  }
  void append(ChoiceDelta&& other);
};

class ChoiceOutput {
 public:
  ChoiceOutput(const tok::Tokenizer& tokenizer, ChoiceOptions options);

  // Feeds one engine event; returns what it adds to the reply.
  ChoiceDelta on_event(const scheduler::RequestEvent& event);

  bool finished() const { return finish_reason_.has_value(); }
  // stop | length | tool_calls | abort | error (set once finished).
  const std::optional<std::string>& finish_reason() const { return finish_reason_; }
  // The stop string or stop token id that ended the choice (vLLM's stop_reason); null if none.
  const Json& stop_reason() const { return stop_reason_; }
  const std::string& error() const { return error_; }
  // Finished by a stop string while the engine request still runs: cancel it.
  bool wants_cancel() const { return wants_cancel_; }
  int64_t completion_tokens() const { return completion_tokens_; }
  // Of those, the tokens generated inside reasoning blocks: with a ThinkingSpec the tags and
  // forced close excluded (so never more than the budget); without one, counted from the split
  // text (the closing tag included).
  int64_t reasoning_tokens() const { return thinking_ ? thinking_->reasoning_tokens() : reasoning_tokens_; }
  // Every generated token id taken so far (the eos that ended the reply included).
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  int num_tool_calls() const { return tools_.num_calls(); }

 private:
  // Runs text that passed the stop matcher through reasoning and tool parsing.
  void route(ChoiceDelta& d, std::string_view text, bool flush);

  const tok::Tokenizer& tokenizer_;
  ChoiceOptions opt_;
  tok::IncrementalDetokenizer detok_;
  StopStringMatcher stops_;
  ReasoningSplitter reasoning_;
  ToolCallParser tools_;
  std::optional<std::string> finish_reason_;
  Json stop_reason_;
  std::string error_;
  bool wants_cancel_ = false;
  int64_t completion_tokens_ = 0;
  int64_t reasoning_tokens_ = 0;
  std::optional<scheduler::ThinkingTracker> thinking_;
  std::vector<int32_t> token_ids_;
  size_t text_bytes_ = 0;
};

}  // namespace ds::server
