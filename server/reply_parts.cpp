#include "server/reply_parts.h"

#include "server/openai_format.h"

namespace ds::server {

void ReplyParts::switch_to(PartKind kind, const ToolCallDelta* call) {
  if (open_ == kind && kind != PartKind::tool_call) return;
  finish();
  open_ = kind;
  sink_.open_part(kind, call);
}

void ReplyParts::add(const ChoiceDelta& d) {
  if (!d.reasoning.empty()) {
    switch_to(PartKind::reasoning, nullptr);
    sink_.append_part(d.reasoning);
  }
  if (!d.content.empty()) {
    switch_to(PartKind::text, nullptr);
    sink_.append_part(d.content);
  }
  for (const ToolCallDelta& c : d.tool_calls) {
    // A call's later deltas only carry argument fragments; the parser finishes one call
    // before it opens the next.
    if (c.opens || open_ != PartKind::tool_call) switch_to(PartKind::tool_call, &c);
    if (!c.arguments.empty()) sink_.append_part(c.arguments);
  }
}

void ReplyParts::finish() {
  if (!open_) return;
  open_.reset();
  sink_.close_part();
}

void PartWriter::write_event(const std::string& type, Json head, Json fields) {
  if (!stream_) return;
  for (auto& [k, v] : fields.items()) head[k] = std::move(v);
  out_ += sse_event(type, head);
}

}  // namespace ds::server
