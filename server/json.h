// The server's JSON type and how it is written.
//
// Requests and responses use nlohmann::ordered_json: keys keep their order, so responses
// read like OpenAI's ("id", "object", "created", ...) and a request's tool schemas reach the
// chat template (whose tojson prints keys in insertion order, as Python does) unchanged.
// dump_json never throws: a string that is not valid UTF-8 is written with U+FFFD.
//
// Every JSON text the server did not write itself (request bodies, tool-call arguments, the
// model's own output) goes through parse_json, which refuses nesting deeper than
// kMaxJsonDepth before parsing: nlohmann's parser, copies and destructor recurse once per
// level, so a 200 KB body of brackets would otherwise overflow the stack.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/grammar/json_nesting.h"

namespace ds::server {

using Json = nlohmann::ordered_json;

inline constexpr size_t kMaxJsonDepth = 128;

// Whether `text` nests arrays/objects deeper than max_depth (model/grammar/json_nesting.h).
inline bool json_too_deep(std::string_view text, size_t max_depth = kMaxJsonDepth) {
  return grammar::json_nests_deeper(text, max_depth);
}

// The parsed value, or a discarded value (is_discarded()) when the text is not JSON or nests
// too deep. Never throws.
inline Json parse_json(std::string_view text) {
  if (json_too_deep(text)) return Json(Json::value_t::discarded);
  return Json::parse(text, nullptr, false);
}

inline std::string dump_json(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace ds::server
