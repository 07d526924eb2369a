// Global functions available to every template (builtins.h): jinja2's range, dict,
// namespace and joiner, and the two HF adds, raise_exception and strftime_now.
#include <ctime>

#include "model/chat/builtin_args.h"
#include "model/chat/builtins.h"
#include "model/chat/template_error.h"

namespace ds::chat {
namespace {

Value g_range(Interpreter& in, CallArgs& a) {
  if (!a.keyword.empty()) eval_fail("range() takes no keyword arguments");
  const auto& p = a.positional;
  if (p.empty() || p.size() > 3) eval_fail("range expected 1 to 3 arguments");
  for (const Value& v : p)
    if (!v.is_int() && !v.is_bool())
      eval_fail("'" + v.type_name() + "' object cannot be interpreted as an integer");
  int64_t start = 0, stop, step = 1;
  if (p.size() == 1) {
    stop = p[0].as_int();
  } else {
    start = p[0].as_int();
    stop = p[1].as_int();
    if (p.size() == 3) step = p[2].as_int();
  }
  if (step == 0) eval_fail("range() arg 3 must not be zero");
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 astep = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + astep - 1) / astep;
  if (count > in.limits().max_range)
    eval_fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
              std::to_string(in.limits().max_range) + ").");
  std::vector<Value> out;
  out.reserve(static_cast<std::size_t>(count));
  for (__int128 i = 0; i < count; ++i) out.emplace_back(static_cast<int64_t>(start + i * step));
  return Value::list(std::move(out));
}

Value g_dict(Interpreter&, CallArgs& a) {
  Value d = Value::dict();
  for (const Value& p : a.positional) {
    if (!p.is_dict() || p.is_namespace()) eval_fail("dict() positional argument must be a mapping");
    for (const auto& [k, v] : p.dict_obj().items()) d.mutable_dict().set(k, v);
  }
  for (const auto& [k, v] : a.keyword) d.mutable_dict().set(Value(k), v);
  return d;
}

Value g_namespace(Interpreter& in, CallArgs& a) {
  Value ns = g_dict(in, a);
  ns.mutable_dict().is_namespace = true;
  in.track(ns);
  return ns;
}

Value g_raise_exception(Interpreter&, CallArgs& a) {
  const Value* msg = a.get(0, "message");
  throw TemplateRaisedError(msg ? py_str(*msg) : std::string("raise_exception() called"));
}

Value g_strftime_now(Interpreter&, CallArgs& a) {
  const auto fmt = args::get_str(a, 0, "format");
  if (!fmt) eval_fail("strftime_now() needs a format string");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  const std::size_t n = std::strftime(buf, sizeof(buf), fmt->c_str(), &local);
  return Value(std::string(buf, n));
}

Value g_joiner(Interpreter&, CallArgs& a) {
  const std::string sep = args::get_str(a, 0, "sep").value_or(", ");
  auto used = std::make_shared<bool>(false);
  return Value::function("joiner", [sep, used](Interpreter&, CallArgs&) {
    if (!*used) {
      *used = true;
      return Value("");
    }
    return Value(sep);
  });
}

}  // namespace

std::unordered_map<std::string, Value> make_globals() {
  return {
      {"range", Value::function("range", g_range)},
      {"dict", Value::function("dict", g_dict)},
      {"namespace", Value::function("namespace", g_namespace)},
      {"raise_exception", Value::function("raise_exception", g_raise_exception)},
      {"strftime_now", Value::function("strftime_now", g_strftime_now)},
      {"joiner", Value::function("joiner", g_joiner)},
  };
}

}  // namespace ds::chat
