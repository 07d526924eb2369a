// The server's JSON type and how it is written.
//
// Requests and responses use nlohmann::ordered_json: keys keep their order, so responses
// read like OpenAI's ("id", "object", "created", ...) and a request's tool schemas reach the
// chat template (whose tojson prints keys in insertion order, as Python does) unchanged.
// dump_json never throws: a string that is not valid UTF-8 is written with U+FFFD.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ds::server {

using Json = nlohmann::ordered_json;

inline std::string dump_json(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace ds::server
