// Thinking budgets on the server side: what a served model's tokenizer and chat template say
// about reasoning blocks (ThinkingSetup, built once at load), and how a chat request's fields
// become the engine's ThinkingSpec (scheduler/thinking_budget.h: the budget is enforced there).
//
// A request's budget, first that applies:
//  1. `thinking_token_budget` (vLLM's field) or `thinking_budget` (SGLang's alias; both given
//     must agree): an integer >= 0;
//  2. `reasoning_effort` (low | medium | high | xhigh; Responses' reasoning.effort arrives
//     as this) through serve's --reasoning-effort-budgets low=N,medium=N,...;
//  3. serve's --default-thinking-budget.
// Anthropic's thinking.budget_tokens arrives as thinking_token_budget (messages_request.h).
// A budget applies only where the reply can think: not when the prompt already closed the
// block (enable_thinking false). Effort none or minimal switches thinking off
// (chat_template_kwargs.enable_thinking = false, unless the request sets it), and a template
// that reads a `reasoning_effort` variable (Qwen3.8's) gets the effort as that variable.
//
// The close sequence, forced once the budget is spent, is "</think>" and whatever the chat
// template writes after it before an answer (found by rendering a turn that has reasoning):
// Qwen's templates write "\n\n". A tokenizer without <think> / </think> tokens cannot have a
// budget: a request that asks for one is a 400, and the server-wide default does nothing.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/chat/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "scheduler/thinking_budget.h"
#include "server/json.h"

namespace ds::server {

inline constexpr int64_t kMaxThinkingBudget = int64_t{1} << 40;

struct ThinkingSetup {
  std::optional<int32_t> open_token;   // <think>
  std::optional<int32_t> close_token;  // </think>
  std::vector<int32_t> close_sequence;
  std::string close_text;              // what close_sequence decodes to (for the log)
  bool template_takes_effort = false;  // the chat template reads `reasoning_effort`
  std::optional<int64_t> default_budget;
  std::map<std::string, int64_t> effort_budgets;

  bool available() const { return open_token && close_token && !close_sequence.empty(); }
  // One line for the start-up log.
  std::string describe() const;
};

// template may be null (no chat template: no close tail is known, the sequence is "</think>").
ThinkingSetup make_thinking_setup(const tok::Tokenizer& tokenizer, const chat::ChatTemplate* tmpl,
                                  std::optional<int64_t> default_budget, std::map<std::string, int64_t> effort_budgets);

// "low=1024,medium=4096,high=16384" -> {effort: budget}; the efforts are low, medium, high and
// xhigh. Throws std::invalid_argument naming what is wrong.
std::map<std::string, int64_t> parse_effort_budgets(const std::string& text);

// The request's thinking fields, checked (400 naming the field).
struct ThinkingFields {
  std::optional<int64_t> budget;      // thinking_token_budget / thinking_budget
  std::optional<std::string> effort;  // reasoning_effort
};
ThinkingFields parse_thinking_fields(const Json& body);

// Sets chat_template_kwargs from reasoning_effort (enable_thinking off for none / minimal;
// reasoning_effort itself for a template that reads it), unless the request set them.
void apply_effort_to_kwargs(const ThinkingFields& f, const ThinkingSetup& setup, Json& kwargs);

// The engine's spec for a chat reply, or null when nothing is to be tracked (no think tokens,
// or the prompt closed the block). starts_inside: the prompt leaves the reply inside <think>;
// closed: the prompt holds a closed block (thinking off); constrained: a structured-output
// grammar shapes the reply (a block opens only at its start, as the splitter reads it). Throws
// ApiError 400 when the request asks for a budget this model cannot enforce.
std::shared_ptr<const scheduler::ThinkingSpec> thinking_spec(const ThinkingFields& f, const ThinkingSetup& setup,
                                                            bool starts_inside, bool closed, bool constrained = false);

}  // namespace ds::server
