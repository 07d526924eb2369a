// The OpenAI Responses API's reply: a response object, whole (the body of a non-streaming
// request) or as the stream's events, built from one choice's ChoiceDeltas through
// ReplyParts, so both carry the same output items.
//
// Output items, in the order the model wrote them: reasoning -> {"type": "reasoning",
// "id": "rs_...", "summary": [], "content": [{"type": "reasoning_text", "text"}]}, text ->
// {"type": "message", "id": "msg_...", "role": "assistant", "content": [{"type":
// "output_text", "text", "annotations": []}]}, each tool call -> {"type": "function_call",
// "id": "fc_...", "call_id": "call_...", "name", "arguments"}. status: "completed", or
// "incomplete" with incomplete_details.reason "max_output_tokens" when the reply hit its
// length (the item open then is "incomplete" too). usage: input_tokens (with
// input_tokens_details.cached_tokens from the prefix cache), output_tokens (with
// output_tokens_details.reasoning_tokens), total_tokens.
//
// Streamed events ("event: <type>\ndata: <json>\n\n", each with a sequence_number):
// response.created, response.in_progress; per item response.output_item.added, then
//   reasoning: response.content_part.added, response.reasoning_text.delta / .done,
//              response.content_part.done
//   message:   response.content_part.added, response.output_text.delta / .done,
//              response.content_part.done
//   function call: response.function_call_arguments.delta / .done
// and response.output_item.done; at the end response.completed or response.incomplete
// with the whole response, or response.failed when the engine failed.
#pragma once

#include <cstdint>
#include <string>

#include "server/openai_format.h"
#include "server/reply_parts.h"

namespace ds::server {

class ResponseWriter final : public PartWriter {
 public:
  // settings: what the response repeats of its request (ResponsesRequest::settings);
  // temperature and top_p as sampled. stream: render the events.
  ResponseWriter(std::string id, int64_t created_at, std::string model, const Json& settings, double temperature,
                 double top_p, bool stream);

  // response.created and response.in_progress (then add() per delta).
  std::string start();
  // Closes the open item; response.completed or response.incomplete. finish_reason as
  // ChoiceOutput reports it; reasoning_tokens as ChoiceOutput counts them.
  std::string finish(const std::string& finish_reason, const Usage& usage, int64_t reasoning_tokens);
  // response.failed (the engine failed the request).
  std::string fail(const std::string& message);
  const Json& response() const { return response_; }

 private:
  void open_part(PartKind kind, const ToolCallDelta* call) override;
  void append_part(std::string_view text) override;
  void close_part() override;
  void event(const std::string& type, Json data) {
    write_event(type, Json{{"type", type}, {"sequence_number", sequence_++}}, std::move(data));
  }
  // The fields that locate the open item's events.
  Json where(bool content_index) const;

  int64_t sequence_ = 0;
  Json response_;
  PartKind kind_ = PartKind::text;
  std::string open_status_ = "completed";  // what the item open at the end becomes
};

}  // namespace ds::server
