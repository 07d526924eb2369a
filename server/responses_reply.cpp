#include "server/responses_reply.h"


#include "server/random_id.h"

namespace ds::server {

namespace {

// The tool-call parser's "call_X" ids name the call; its item is "fc_X".
std::string function_item_id(const std::string& call_id) {
  constexpr std::string_view kCall = "call_";
  return "fc_" + (call_id.rfind(kCall, 0) == 0 ? call_id.substr(kCall.size()) : call_id);
}

Json text_part(const char* type, std::string text) {
  Json p = {{"type", type}, {"text", std::move(text)}};
  if (std::string_view(type) == "output_text") p["annotations"] = Json::array();
  return p;
}

}  // namespace

ResponseWriter::ResponseWriter(std::string id, int64_t created_at, std::string model, const Json& s,
                               double temperature, double top_p, bool stream)
    : PartWriter(stream) {
  response_ = {{"id", std::move(id)},
               {"object", "response"},
               {"created_at", created_at},
               {"status", "in_progress"},
               {"background", false},
               {"error", nullptr},
               {"incomplete_details", nullptr},
               {"instructions", s.value("instructions", Json(nullptr))},
               {"max_output_tokens", s.value("max_output_tokens", Json(nullptr))},
               {"model", std::move(model)},
               {"output", Json::array()},
               {"parallel_tool_calls", s.value("parallel_tool_calls", Json(true))},
               {"previous_response_id", nullptr},
               {"reasoning", s.value("reasoning", Json(nullptr))},
               {"store", false},
               {"temperature", temperature},
               {"text", s.value("text", Json(nullptr))},
               {"tool_choice", s.value("tool_choice", Json("auto"))},
               {"tools", s.value("tools", Json::array())},
               {"top_p", top_p},
               {"truncation", "disabled"},
               {"usage", nullptr},
               {"user", s.value("user", Json(nullptr))},
               {"metadata", s.value("metadata", Json::object())}};
}

Json ResponseWriter::where(bool content_index) const {
  const Json& output = response_["output"];
  Json w = {{"item_id", output.back()["id"]}, {"output_index", output.size() - 1}};
  if (content_index) w["content_index"] = 0;
  return w;
}

std::string ResponseWriter::start() {
  event("response.created", Json{{"response", response_}});
  event("response.in_progress", Json{{"response", response_}});
  return take();
}

void ResponseWriter::open_part(PartKind kind, const ToolCallDelta* call) {
  kind_ = kind;
  Json item;
  switch (kind) {
    case PartKind::reasoning:
      item = {{"id", random_id("rs_")}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", Json::array()},
              {"status", "in_progress"}};
      break;
    case PartKind::text:
      item = {{"id", random_id("msg_")}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
              {"content", Json::array()}};
      break;
    case PartKind::tool_call:
      item = {{"id", function_item_id(call->id)}, {"type", "function_call"}, {"status", "in_progress"},
              {"call_id", call->id}, {"name", call->name}, {"arguments", ""}};
      break;
  }
  Json& output = response_["output"];
  output.push_back(item);
  event("response.output_item.added", Json{{"output_index", output.size() - 1}, {"item", std::move(item)}});
  if (kind == PartKind::tool_call) return;
  const Json part = text_part(kind == PartKind::text ? "output_text" : "reasoning_text", "");
  output.back()["content"].push_back(part);
  Json w = where(true);
  w["part"] = part;
  event("response.content_part.added", std::move(w));
}

void ResponseWriter::append_part(std::string_view text) {
  Json& item = response_["output"].back();
  Json w = where(kind_ != PartKind::tool_call);
  w["delta"] = std::string(text);
  switch (kind_) {
    case PartKind::reasoning:
      item["content"][0]["text"].get_ref<std::string&>().append(text);
      event("response.reasoning_text.delta", std::move(w));
      break;
    case PartKind::text:
      item["content"][0]["text"].get_ref<std::string&>().append(text);
      w["logprobs"] = Json::array();
      event("response.output_text.delta", std::move(w));
      break;
    case PartKind::tool_call:
      item["arguments"].get_ref<std::string&>().append(text);
      event("response.function_call_arguments.delta", std::move(w));
      break;
  }
}

void ResponseWriter::close_part() {
  Json& item = response_["output"].back();
  item["status"] = open_status_;
  if (kind_ == PartKind::tool_call) {
    Json w = where(false);
    w["name"] = item["name"];
    w["arguments"] = item["arguments"];
    event("response.function_call_arguments.done", std::move(w));
  } else {
    const Json& part = item["content"][0];
    Json w = where(true);
    w["text"] = part["text"];
    if (kind_ == PartKind::text) w["logprobs"] = Json::array();
    event(kind_ == PartKind::text ? "response.output_text.done" : "response.reasoning_text.done", w);
    w.erase("text");
    w.erase("logprobs");
    w["part"] = part;
    event("response.content_part.done", std::move(w));
  }
  event("response.output_item.done", Json{{"output_index", response_["output"].size() - 1}, {"item", item}});
}

std::string ResponseWriter::finish(const std::string& finish_reason, const Usage& u, int64_t reasoning_tokens) {
  const bool incomplete = finish_reason == "length";
  if (incomplete) open_status_ = "incomplete";
  finish_parts();
  response_["status"] = incomplete ? "incomplete" : "completed";
  if (incomplete) response_["incomplete_details"] = Json{{"reason", "max_output_tokens"}};
  response_["usage"] = Json{{"input_tokens", u.prompt_tokens},
                            {"input_tokens_details", {{"cached_tokens", u.cached_tokens.value_or(0)}}},
                            {"output_tokens", u.completion_tokens},
                            {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
                            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  event(incomplete ? "response.incomplete" : "response.completed", Json{{"response", response_}});
  return take();
}

std::string ResponseWriter::fail(const std::string& message) {
  response_["status"] = "failed";
  response_["error"] = Json{{"code", "server_error"}, {"message", message}};
  event("response.failed", Json{{"response", response_}});
  return take();
}

}  // namespace ds::server
