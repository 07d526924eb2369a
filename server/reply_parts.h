// ReplyParts: a choice's output as the ordered parts that the Anthropic Messages API
// (content blocks) and the OpenAI Responses API (output items) are made of -- reasoning,
// text, and one part per tool call.
//
// Fed the same ChoiceDeltas as the chat stream (choice_output.h), it tells its sink when a
// part opens, grows and closes: a part closes when output of another kind, or another tool
// call, begins, and at finish(). Within a delta the order is reasoning, text, tool calls (the
// order the pipeline produces them in). A writer that renders the whole reply and its stream
// from these calls gives the same parts either way.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "server/choice_output.h"
#include "server/json.h"

namespace ds::server {

enum class PartKind { reasoning, text, tool_call };

class PartSink {
 public:
  virtual ~PartSink() = default;
  // A part begins; for a tool call, `call` is its opening delta (id and name).
  virtual void open_part(PartKind kind, const ToolCallDelta* call) = 0;
  // More of the open part: reasoning or text, or a fragment of a call's JSON arguments.
  virtual void append_part(std::string_view text) = 0;
  virtual void close_part() = 0;
};

class ReplyParts {
 public:
  explicit ReplyParts(PartSink& sink) : sink_(sink) {}

  void add(const ChoiceDelta& delta);
  // Closes the open part, if any.
  void finish();
  // The kind of the part open now.
  std::optional<PartKind> open_kind() const { return open_; }

 private:
  void switch_to(PartKind kind, const ToolCallDelta* call);

  PartSink& sink_;
  std::optional<PartKind> open_;
};

// What the API writers (messages_reply.h, responses_reply.h) share: a PartSink whose parts
// come from ReplyParts, and the SSE events it writes for them, handed out per delta.
class PartWriter : protected PartSink {
 public:
  explicit PartWriter(bool stream) : stream_(stream) {}
  // parts_ refers to this object.
  PartWriter(const PartWriter&) = delete;
  PartWriter& operator=(const PartWriter&) = delete;
  // The events of one delta.
  std::string add(const ChoiceDelta& delta) {
    parts_.add(delta);
    return take();
  }

 protected:
  // Closes the open part.
  void finish_parts() { parts_.finish(); }
  // The events written since the last take.
  std::string take() { return std::exchange(out_, {}); }
  // "event: <type>\ndata: <head, then fields>\n\n", when streaming (a non-streaming reply
  // only needs the writer's whole object).
  void write_event(const std::string& type, Json head, Json fields);

 private:
  bool stream_;
  ReplyParts parts_{*this};
  std::string out_;
};

}  // namespace ds::server
