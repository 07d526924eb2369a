// The Anthropic Messages API's reply: a message object, whole (the body of a non-streaming
// request) or as the stream's events, built from one choice's ChoiceDeltas through
// ReplyParts, so both carry the same content blocks.
//
//   {"id": "msg_...", "type": "message", "role": "assistant", "model": ..., "content": [
//      {"type": "thinking", "thinking": ..., "signature": ""},   reasoning
//      {"type": "text", "text": ...},
//      {"type": "tool_use", "id": "toolu_...", "name": ..., "input": {...}}],
//    "stop_reason": "end_turn" | "max_tokens" | "stop_sequence" | "tool_use",
//    "stop_sequence": the matched stop sequence or null,
//    "usage": {"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"}}
//
// Streamed events ("event: <type>\ndata: <json>\n\n"): message_start (the message with empty
// content and the prompt's input_tokens), per block content_block_start /
// content_block_delta (text_delta, thinking_delta, input_json_delta) / content_block_stop,
// then message_delta (stop_reason, stop_sequence, the final usage) and message_stop.
// Thinking blocks carry an empty signature: there is nothing to sign, and the model's
// reasoning comes back in plain text when a client returns the block.
// Usage as Anthropic counts it: input_tokens are the prompt tokens not read from the prefix
// cache, cache_read_input_tokens those that were.
#pragma once

#include <string>

#include "server/api_error.h"
#include "server/openai_format.h"
#include "server/reply_parts.h"

namespace ds::server {

Json messages_usage_json(const Usage& usage);

// "event: error" with the Anthropic error object (a failure after the stream began).
std::string messages_error_event(const ApiError& error);

class MessageWriter final : public PartWriter {
 public:
  // stream: render the events (a non-streaming reply only needs message()).
  MessageWriter(std::string id, std::string model, bool stream);

  // message_start (then add() per delta).
  std::string start(const Usage& usage);
  // Closes the open block; message_delta and message_stop. finish_reason and stop_reason as
  // ChoiceOutput reports them.
  std::string finish(const std::string& finish_reason, const Json& stop_reason, const Usage& usage);
  // The whole message (after finish).
  const Json& message() const { return message_; }

 private:
  void open_part(PartKind kind, const ToolCallDelta* call) override;
  void append_part(std::string_view text) override;
  void close_part() override;
  void event(const char* type, Json data) { write_event(type, Json{{"type", type}}, std::move(data)); }

  Json message_;
  PartKind kind_ = PartKind::text;
  std::string arguments_;  // the open tool_use block's JSON so far
};

}  // namespace ds::server
