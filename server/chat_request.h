// From an OpenAI chat request to prompt token ids: message normalisation, the model's chat
// template, tokenisation.
//
// The chat fields are checked and the messages normalised by chat_messages.h; the rendered
// text is tokenised with special tokens parsed, as HF's apply_chat_template does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/chat_messages.h"
#include "server/json.h"
#include "server/served_model.h"
#include "server/thinking_setup.h"

namespace ds::server {

// What the generation prompt (the text after the last <|im_start|>) says about reasoning.
enum class PromptReasoning {
  up_to_model,  // nothing: the model may open <think> itself (Qwen3 templates, thinking on)
  opened,       // it ends inside <think> (Qwen3.5 templates, thinking on)
  closed,       // it holds <think>...</think> already (thinking off)
};

struct ChatPrompt {
  std::string rendered;
  std::vector<int32_t> ids;
  bool opens_reasoning = false;   // the reply starts inside <think>
  PromptReasoning reasoning = PromptReasoning::up_to_model;
  Json tools;                     // the request's tools (null when none)
  bool parse_tool_calls = false;  // tools given and tool_choice is not "none"
  bool force_tool_call = false;   // tool_choice "required" or a named function (chat_messages.h)
  std::string forced_function;
  bool parallel_tool_calls = true;
  // Where later requests are likely to share this prompt's prefix, for the prefix cache's
  // snapshots: the prompt's end (the next turn extends it) and the end of the leading system
  // messages (with the tools).
  std::vector<int64_t> cache_points;
  // thinking_token_budget / thinking_budget / reasoning_effort (thinking_setup.h).
  ThinkingFields thinking;
};

// Checks the chat-only fields and builds the prompt. Throws ApiError (400 for bad messages,
// unsupported fields or a template that rejects the request).
ChatPrompt build_chat_prompt(const Json& body, const ServedModel& model);

}  // namespace ds::server
