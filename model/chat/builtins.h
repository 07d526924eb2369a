// The built-in library of the Jinja subset: filters, tests, Python methods of str / list /
// dict values, and global functions. Each is a plain function over Values; argument errors
// and type errors are reported with eval_fail() (the interpreter adds the location).
//
// Filters: abs, attr, capitalize, center, count, default/d, dictsort, escape/e, first, float,
//   format, indent, int, items, join, last, length, list, lower, map, max, min, reject,
//   rejectattr, replace, reverse, round, safe, select, selectattr, sort, string, sum, title,
//   tojson (HF's: json.dumps with ensure_ascii=False, keys unsorted), trim, truncate, unique,
//   upper, wordcount.
// Tests: boolean, callable, defined, divisibleby, eq/equalto/==, escaped, even, false, filter,
//   float, ge/>=, gt/>/greaterthan, in, integer, iterable, le/<=, lower, lt/</lessthan,
//   mapping, ne/!=, none, number, odd, sameas, sequence, string, test, true, undefined, upper.
// Methods: str.startswith/endswith/split/rsplit/splitlines/strip/lstrip/rstrip/upper/lower/
//   title/capitalize/replace/find/rfind/index/count/join/format/isdigit/isalpha/isalnum/
//   isspace/isupper/islower; dict.items/keys/values/get; list.index/count.
// Globals: range, namespace, dict, raise_exception (HF), strftime_now (HF), joiner.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>

#include "model/chat/interpreter.h"
#include "model/chat/value.h"

namespace ds::chat {

using FilterFn = Value (*)(Interpreter&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& input, CallArgs& args);

bool has_filter(std::string_view name);
bool has_test(std::string_view name);
// Apply a filter / test, checking the arguments the way Python checks the call.
Value call_filter(Interpreter& in, std::string_view name, const Value& input, CallArgs& args);
bool call_test(Interpreter& in, std::string_view name, const Value& input, CallArgs& args);

// True when `name` is a Python attribute (method) of obj's built-in type, which jinja2's
// getattr prefers over a dict key of the same name.
bool has_method(const Value& obj, std::string_view name);
// Calls obj.name(args); eval_fail for an unknown method.
Value call_method(Interpreter& in, const Value& obj, const std::string& name, CallArgs& args);

std::unordered_map<std::string, Value> make_globals();

// Python's str % args (printf-style formatting).
std::string py_percent_format(Interpreter& in, const std::string& format, const Value& args);

}  // namespace ds::chat
