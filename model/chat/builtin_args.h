// Argument helpers shared by the builtin filters, tests, methods and globals: fetch a
// parameter by position or keyword, with Python-style type checks.
#pragma once

#include <optional>
#include <string>

#include "model/chat/interpreter.h"
#include "model/chat/py_format.h"
#include "model/chat/value.h"

namespace ds::chat::args {

// The argument at `pos` (counting from the first argument after the input) or named `name`.
inline const Value* get(const CallArgs& a, std::size_t pos, std::string_view name) {
  return a.get(pos, name);
}

inline bool get_bool(const CallArgs& a, std::size_t pos, std::string_view name, bool fallback) {
  const Value* v = get(a, pos, name);
  return v && !v->is_undefined() ? v->truthy() : fallback;
}

inline int64_t get_int(const CallArgs& a, std::size_t pos, std::string_view name, int64_t fallback) {
  const Value* v = get(a, pos, name);
  if (!v || v->is_undefined() || v->is_none()) return fallback;
  if (!v->is_int() && !v->is_bool())
    eval_fail("argument '" + std::string(name) + "' must be an integer, not " + v->type_name());
  return v->as_int();
}

inline std::optional<std::string> get_str(const CallArgs& a, std::size_t pos, std::string_view name) {
  const Value* v = get(a, pos, name);
  if (!v || v->is_undefined() || v->is_none()) return std::nullopt;
  if (!v->is_string())
    eval_fail("argument '" + std::string(name) + "' must be a string, not " + v->type_name());
  return v->str();
}

inline const std::string& require_str(const Value& v, const char* what) {
  if (!v.is_string()) eval_fail(std::string(what) + " must be a string, not " + v.type_name());
  return v.str();
}

}  // namespace ds::chat::args
