// The chat-only fields of an OpenAI chat request, checked and put into the form HF chat
// templates expect, before any template or tokenizer is involved (so the fuzz target in
// tests/fuzz can drive them alone).
//
// Messages are made into what HF chat templates expect:
//  * content as a string: text parts ({"type": "text", "text": ...}) are joined with "\n";
//    a message with image parts ({"type": "image_url", "image_url": {"url": ...}} or
//    {"type": "image_url", "image_url": "..."}) keeps a list of parts instead, text parts as
//    they are and each image as {"type": "image"} (what Qwen's templates render as the image's
//    placeholder), and its URLs are collected in order (ChatFields::images); video_url parts
//    (vLLM's extension: {"type": "video_url", "video_url": {"url": ...}}) likewise become
//    {"type": "video"} with their URLs in ChatFields::videos; any other part type
//    (input_audio, file) is refused by name;
//  * role "developer" (OpenAI's newer name) becomes "system";
//  * assistant tool_calls keep their OpenAI shape, with function.arguments parsed from its
//    JSON string into an object (Qwen3.5's template iterates arguments|items);
//  * an assistant message's `reasoning` is copied to `reasoning_content` (the field templates
//    read) when only the former is given, so both spellings work on input too.
// The template gets `tools` (when given) and every chat_template_kwargs entry (e.g.
// enable_thinking) as variables. Every refusal is an ApiError 400 naming the field. Tool
// names are what OpenAI and Anthropic accept (1-64 of a-z, A-Z, 0-9, '_' and '-'): anything
// else could not round-trip through the model's tool-call markup (`<function=NAME>`).
#pragma once

#include <string>
#include <vector>

#include "server/json.h"

namespace ds::server {

// An image or video part of a request: its URL and the field it came from
// (server/image_inputs.h and video_inputs.h fetch and prepare it).
// The key under which an image_url part translated from the Messages or Responses API keeps
// the field the client sent, so that the image's errors name it.
inline constexpr const char* kClientField = "client_field";

struct ImageRef {
  std::string url;
  std::string field;
};

struct ChatFields {
  Json messages;                 // normalised
  std::vector<ImageRef> images;  // the image parts' URLs, in message order
  std::vector<ImageRef> videos;  // the video parts' URLs, in message order
  Json kwargs = Json::object();  // template variables: chat_template_kwargs plus tools
  Json tools;                    // the request's tools (null when none)
  bool parse_tool_calls = false; // tools given and tool_choice is not "none"
  // tool_choice "required" or {"type": "function", "function": {"name": ...}}: the reply must
  // be tool calls (tool_call_grammar.h); forced_function names the one function, or is empty
  // for any. parallel_tool_calls (default true) lets "required" make several calls.
  bool force_tool_call = false;
  std::string forced_function;
  bool parallel_tool_calls = true;
  bool add_generation_prompt = true;
};

ChatFields parse_chat_fields(const Json& body);

// Throws ApiError 400 naming `where` (the name's field) unless `name` is a valid tool name.
void check_tool_name(const std::string& name, const std::string& where);

// The messages array in template form (exposed for /tokenize and tests). images / videos:
// where image / video parts' URLs go (null: such parts are refused).
Json normalize_messages(const Json& messages, std::vector<ImageRef>* images = nullptr,
                        std::vector<ImageRef>* videos = nullptr);

}  // namespace ds::server
