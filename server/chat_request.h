// From an OpenAI chat request to prompt token ids: message normalisation, the model's chat
// template, tokenisation.
//
// Messages are made into what HF chat templates expect:
//  * content as a string: text parts ({"type": "text", "text": ...}) are joined with "\n";
//    any other part type (image_url, input_audio, file) is refused by name;
//  * role "developer" (OpenAI's newer name) becomes "system";
//  * assistant tool_calls keep their OpenAI shape, with function.arguments parsed from its
//    JSON string into an object (Qwen3.5's template iterates arguments|items);
//  * an assistant message's `reasoning` is copied to `reasoning_content` (the field templates
//    read) when only the former is given, so both spellings work on input too.
// The template gets `tools` (when given) and every chat_template_kwargs entry (e.g.
// enable_thinking) as variables. The rendered text is tokenised with special tokens parsed,
// as HF's apply_chat_template does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/json.h"
#include "server/served_model.h"

namespace ds::server {

struct ChatPrompt {
  std::string rendered;
  std::vector<int32_t> ids;
  bool opens_reasoning = false;   // the reply starts inside <think>
  Json tools;                     // the request's tools (null when none)
  bool parse_tool_calls = false;  // tools given and tool_choice is not "none"
};

// Checks the chat-only fields and builds the prompt. Throws ApiError (400 for bad messages,
// unsupported fields or a template that rejects the request).
ChatPrompt build_chat_prompt(const Json& body, const ServedModel& model);

// The messages array in template form (exposed for /tokenize and tests).
Json normalize_messages(const Json& messages);

}  // namespace ds::server
