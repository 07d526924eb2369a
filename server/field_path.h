// Reading the fields nested in a request body and naming them by their path in errors
// ("messages[2].content[0].text"): what the request translators share
// (messages_request.cpp, responses_request.cpp).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/chat_messages.h"
#include "server/json.h"

namespace ds::server {

// where[i]
inline std::string field_path(const std::string& where, size_t i) { return where + "[" + std::to_string(i) + "]"; }

// obj[key] as a string; otherwise a 400 naming where.key.
inline const std::string& string_field(const Json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string())
    throw bad_request("'" + where + "." + key + "' must be a string", where + "." + key);
  return it->get_ref<const std::string&>();
}

// obj[key] where obj is an object holding a string there, else "": for tests of a field's value
// (json's value(key, "") throws on a field of another type, which would be a 500).
inline std::string string_or_empty(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

// obj[key] as a string, "" when absent or null; any other value is a 400 naming where.key.
inline std::string optional_string_field(const Json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return "";
  if (!it->is_string()) throw bad_request("'" + where + "." + key + "' must be a string", where + "." + key);
  return it->get<std::string>();
}

// obj, which must be an object (else a 400 naming where), and its "type" string.
inline std::string typed_object(const Json& obj, const std::string& where) {
  if (!obj.is_object()) throw bad_request("'" + where + "' must be an object", where);
  return string_field(obj, "type", where);
}

// A string, or a list of {"type": T, "text": ...} parts with T among `types`, as one text
// (parts joined with "\n"); a part of another type is refused by name.
inline std::string text_parts(const Json& content, const std::string& where,
                              std::initializer_list<std::string_view> types) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_request("'" + where + "' must be a string or a list of text parts", where);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string w = field_path(where, i);
    const std::string type = typed_object(content[i], w);
    bool accepted = false;
    for (std::string_view t : types) accepted = accepted || type == t;
    if (!accepted) throw unsupported_field(w + ".type", "content of type '" + type + "' (only text is accepted here)");
    if (i > 0) text += '\n';
    text += string_field(content[i], "text", w);
  }
  return text;
}

// Each element of `list` (the request field `name`: a list of objects, else a 400) through
// fn(element, its path), collected into a list.
template <class Fn>
Json map_objects(const Json& list, const std::string& name, Fn&& fn) {
  if (!list.is_array()) throw bad_request("'" + name + "' must be a list", name);
  Json out = Json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string w = field_path(name, i);
    if (!list[i].is_object()) throw bad_request("'" + w + "' must be an object", w);
    out.push_back(fn(list[i], w));
  }
  return out;
}

// A chat function tool from a tool object's name and description (at `where`) and its
// parameters' schema.
inline Json chat_function_tool(const Json& tool, const std::string& where, Json parameters) {
  Json fn = {{"name", string_field(tool, "name", where)}};
  check_tool_name(fn["name"].get<std::string>(), where + ".name");
  auto d = tool.find("description");
  if (d != tool.end() && !d->is_null()) {
    if (!d->is_string()) throw bad_request("'" + where + ".description' must be a string", where + ".description");
    fn["description"] = *d;
  }
  if (!parameters.is_null()) fn["parameters"] = std::move(parameters);
  return Json{{"type", "function"}, {"function", std::move(fn)}};
}

}  // namespace ds::server
