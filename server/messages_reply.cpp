#include "server/messages_reply.h"


namespace ds::server {

namespace {

// The tool-call parser's "call_X" ids as Anthropic's "toolu_X".
std::string tool_use_id(const std::string& call_id) {
  constexpr std::string_view kCall = "call_";
  return "toolu_" + (call_id.rfind(kCall, 0) == 0 ? call_id.substr(kCall.size()) : call_id);
}

}  // namespace

Json messages_usage_json(const Usage& u) {
  const int64_t cached = u.cached_tokens.value_or(0);
  Json j{{"input_tokens", u.prompt_tokens - cached},
         {"cache_creation_input_tokens", 0},
         {"cache_read_input_tokens", cached},
         {"output_tokens", u.completion_tokens}};
  // Anthropic's usage has no reasoning count (output_tokens includes thinking); this is ours,
  // spelled as the Responses API spells it.
  if (u.reasoning_tokens) j["output_tokens_details"] = Json{{"reasoning_tokens", *u.reasoning_tokens}};
  return j;
}

std::string messages_error_event(const ApiError& e) { return sse_event("error", e.anthropic_body()); }

MessageWriter::MessageWriter(std::string id, std::string model, bool stream)
    : PartWriter(stream),
      message_{{"id", std::move(id)},
               {"type", "message"},
               {"role", "assistant"},
               {"model", std::move(model)},
               {"content", Json::array()},
               {"stop_reason", nullptr},
               {"stop_sequence", nullptr},
               {"usage", nullptr}} {}

std::string MessageWriter::start(const Usage& usage) {
  Json m = message_;
  m["usage"] = messages_usage_json(usage);
  event("message_start", Json{{"message", std::move(m)}});
  return take();
}

void MessageWriter::open_part(PartKind kind, const ToolCallDelta* call) {
  kind_ = kind;
  Json block;
  switch (kind) {
    case PartKind::reasoning: block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}; break;
    case PartKind::text: block = {{"type", "text"}, {"text", ""}}; break;
    case PartKind::tool_call:
      block = {{"type", "tool_use"}, {"id", tool_use_id(call->id)}, {"name", call->name}, {"input", Json::object()}};
      arguments_.clear();
      break;
  }
  Json& content = message_["content"];
  event("content_block_start", Json{{"index", content.size()}, {"content_block", block}});
  content.push_back(std::move(block));
}

void MessageWriter::append_part(std::string_view text) {
  Json& content = message_["content"];
  Json& block = content.back();
  const size_t index = content.size() - 1;
  switch (kind_) {
    case PartKind::reasoning:
      block["thinking"].get_ref<std::string&>().append(text);
      event("content_block_delta", Json{{"index", index}, {"delta", {{"type", "thinking_delta"}, {"thinking", std::string(text)}}}});
      break;
    case PartKind::text:
      block["text"].get_ref<std::string&>().append(text);
      event("content_block_delta", Json{{"index", index}, {"delta", {{"type", "text_delta"}, {"text", std::string(text)}}}});
      break;
    case PartKind::tool_call:
      arguments_.append(text);
      event("content_block_delta",
            Json{{"index", index}, {"delta", {{"type", "input_json_delta"}, {"partial_json", std::string(text)}}}});
      break;
  }
}

void MessageWriter::close_part() {
  Json& content = message_["content"];
  if (kind_ == PartKind::tool_call) {
    // The parser closes every call it opened, so its arguments are a JSON object; anything
    // else (nothing at all, say) leaves the input empty.
    Json input = parse_json(arguments_);
    if (input.is_object()) content.back()["input"] = std::move(input);
  }
  event("content_block_stop", Json{{"index", content.size() - 1}});
}

std::string MessageWriter::finish(const std::string& finish_reason, const Json& stop_reason, const Usage& usage) {
  finish_parts();
  Json reason = "end_turn";
  Json sequence = nullptr;
  if (finish_reason == "length") {
    reason = "max_tokens";
  } else if (finish_reason == "tool_calls") {
    reason = "tool_use";
  } else if (stop_reason.is_string()) {
    reason = "stop_sequence";
    sequence = stop_reason;
  }
  message_["stop_reason"] = reason;
  message_["stop_sequence"] = sequence;
  message_["usage"] = messages_usage_json(usage);
  event("message_delta", Json{{"delta", {{"stop_reason", reason}, {"stop_sequence", sequence}}},
                              {"usage", message_["usage"]}});
  event("message_stop", Json::object());
  return take();
}

}  // namespace ds::server
