// From an OpenAI chat request to prompt token ids: message normalisation, the model's chat
// template, tokenisation.
//
// The chat fields are checked and the messages normalised by chat_messages.h; the rendered
// text is tokenised with special tokens parsed, as HF's apply_chat_template does. Videos are
// decoded before tokenisation (their timestamps go into the text: video_inputs.h), images
// after it (image_inputs.h expands both kinds of pads).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/request.h"
#include "server/chat_messages.h"
#include "server/json.h"
#include "server/media_fetch.h"
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
  // snapshots: the generation prompt's start (the next turn renders the reply there) and the
  // end of the leading system messages (with the tools).
  std::vector<int64_t> cache_points;
  // The prompt's images (null: none); ids holds their pads expanded (image_inputs.h).
  std::shared_ptr<const scheduler::MultimodalInput> multimodal;
  // thinking_token_budget / thinking_budget / reasoning_effort (thinking_setup.h).
  ThinkingFields thinking;
};

// Checks the chat-only fields and builds the prompt, its images fetched and prepared when it
// has any (image_inputs.h). Throws ApiError (400 for bad messages, unsupported fields, a
// template that rejects the request, an image that cannot be used or a model that takes none;
// 499 when `stop` ended an image fetch because the client left).
ChatPrompt build_chat_prompt(const Json& body, const ServedModel& model, FetchStop* stop = nullptr);

}  // namespace ds::server
