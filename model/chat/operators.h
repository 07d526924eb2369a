// Python's operators as the template interpreter evaluates them (operators.cpp). Internal to
// model/chat; eval_fail, py_less and py_length are declared in interpreter.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/chat/interpreter.h"

namespace ds::chat {

// eval_fail with the undefined value's own message.
[[noreturn]] void undefined_error(const Value& v);
// "'<type> object'", as Python names a value's type in errors.
std::string type_object(const Value& v);
// a op b for the arithmetic and string operators (+ - * / // % ** ~).
Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b);
// a op b for the comparisons (== != < > <= >= in notin).
bool compare_op(const std::string& op, const Value& a, const Value& b);
// The indices a Python slice [start:stop:step] picks from a sequence of n elements (start,
// stop, step: integers or none).
std::vector<std::size_t> slice_indices(int64_t n, const Value& start_v, const Value& stop_v, const Value& step_v);

}  // namespace ds::chat
