// Python's text forms of values, which templates expose: str() (what {{ x }} prints), repr()
// (how a list or dict prints its elements), float repr (shortest round-trip digits, "1e-05",
// "1.0"), and json.dumps as HF's tojson filter calls it.
#pragma once

#include <optional>
#include <string>

#include "model/chat/value.h"

namespace ds::chat {

std::string py_str(const Value& v);
std::string py_repr(const Value& v);
std::string py_float_repr(double f);

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: single line
  std::string item_separator = ", ";  // json.dumps defaults (", " becomes "," with indent)
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(v, ...). Throws TemplateRuntimeError for values JSON cannot represent
// (undefined, callables) and for nesting deeper than 512.
std::string py_json_dumps(const Value& v, const JsonOptions& options);

// Appends the JSON string literal of `s` (valid UTF-8) to `out`.
void json_quote(std::string& out, const std::string& s, bool ensure_ascii);

}  // namespace ds::chat
