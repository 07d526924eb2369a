#include "programs/bench_serve/request_body.h"

#include <stdexcept>

namespace ds::bench {

namespace {

Json object_flag(const std::string& text, const char* flag) {
  Json j = Json::parse(text, nullptr, false);
  if (!j.is_object()) throw std::invalid_argument(std::string(flag) + " must be a JSON object");
  return j;
}

}  // namespace

Json default_structured_body(bool chat) {
  const Json tag = {{"type", "string"}, {"maxLength", 12}};
  const Json schema = {
      {"type", "object"},
      {"properties",
       {{"title", {{"type", "string"}, {"maxLength", 24}}},
        {"category", {{"type", "string"}, {"enum", {"book", "film", "music", "game"}}}},
        {"rating", {{"type", "integer"}, {"minimum", 1}, {"maximum", 5}}},
        {"available", {{"type", "boolean"}}},
        {"tags", {{"type", "array"}, {"items", tag}, {"maxItems", 3}}}}},
      {"required", {"title", "category", "rating", "available", "tags"}},
      {"additionalProperties", false}};
  if (!chat) return {{"structured_outputs", {{"json", schema}}}};
  const Json json_schema = {{"name", "catalog_item"}, {"strict", true}, {"schema", schema}};
  return {{"response_format", {{"type", "json_schema"}, {"json_schema", json_schema}}}};
}

RequestBody::RequestBody(const BenchOptions& o, std::string model)
    : chat_(is_chat_endpoint(o)), route_(o.endpoint) {
  base_["model"] = std::move(model);
  base_["stream"] = true;
  base_["stream_options"] = {{"include_usage", true}};
  if (o.ignore_eos) base_["ignore_eos"] = true;
  if (o.temperature) base_["temperature"] = *o.temperature;
  structured_ = o.structured_body.empty() ? default_structured_body(chat_)
                                          : object_flag(o.structured_body, "--structured-body");
  if (!o.extra_body.empty()) extra_ = object_flag(o.extra_body, "--extra-body");
}

std::string RequestBody::make(const Json& input, int max_tokens, bool structured, const std::string& model) const {
  Json body = base_;
  if (!model.empty()) body["model"] = model;
  body[chat_ ? "messages" : "prompt"] = input;
  body[chat_ ? "max_completion_tokens" : "max_tokens"] = max_tokens;
  if (structured) body.merge_patch(structured_);
  if (!extra_.is_null()) body.merge_patch(extra_);
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace ds::bench
