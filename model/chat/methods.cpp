// Python methods of str, dict and list values (builtins.h), as a template calls them:
// "text".startswith("t"), message.get("content", ""), items.index(x). Methods that would
// mutate a value are refused, as in jinja2's ImmutableSandboxedEnvironment.
#include <algorithm>
#include <array>
#include <string_view>

#include "model/chat/builtin_args.h"
#include "model/chat/builtins.h"
#include "model/chat/py_format.h"
#include "model/chat/py_string.h"

namespace ds::chat {
namespace {

constexpr std::string_view kStrMethods[] = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find",
    "format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
    "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper",
    "join", "ljust", "lower", "lstrip", "maketrans", "partition", "removeprefix",
    "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip",
    "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper",
    "zfill"};
constexpr std::string_view kDictMethods[] = {"clear", "copy", "fromkeys", "get", "items", "keys",
                                             "pop", "popitem", "setdefault", "update", "values"};
constexpr std::string_view kListMethods[] = {"append", "clear", "copy", "count", "extend", "index",
                                             "insert", "pop", "remove", "reverse", "sort"};
constexpr std::string_view kTupleMethods[] = {"count", "index"};

template <std::size_t N>
bool listed(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

// str.startswith / endswith: a string or a tuple of strings.
bool affix_match(const std::string& s, const Value& arg, bool prefix) {
  const auto one = [&](const Value& a) {
    const std::string& x = args::require_str(a, prefix ? "startswith argument" : "endswith argument");
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg.is_list()) {
    for (const Value& a : arg.items())
      if (one(a)) return true;
    return false;
  }
  return one(arg);
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, int side) {
  const auto len = static_cast<int64_t>(py_len(s));
  if (width <= len) return s;
  std::string padding;
  for (int64_t i = 0; i < width - len; ++i) padding += fill;
  return side < 0 ? s + padding : padding + s;
}

// str.format with automatic ({}), positional ({0}) and keyword ({name}) fields.
std::string str_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
      continue;
    }
    if (c == '}') eval_fail("Single '}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const std::size_t close = fmt.find('}', i);
    if (close == std::string::npos) eval_fail("Single '{' encountered in format string");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":![.") != std::string::npos)
      eval_fail("format fields with conversions, specs or attributes are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= a.positional.size()) eval_fail("Replacement index out of range");
      v = &a.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const std::size_t idx = field.size() < 9 ? std::stoul(field) : SIZE_MAX;
      if (idx >= a.positional.size()) eval_fail("Replacement index out of range");
      v = &a.positional[idx];
    } else {
      for (const auto& [k, val] : a.keyword)
        if (k == field) v = &val;
      if (!v) eval_fail("KeyError: '" + field + "'");
    }
    out += py_str(*v);
    i = close;
  }
  return out;
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (std::string& p : parts) out.emplace_back(std::move(p));
  return Value::list(std::move(out));
}

Value call_str_method(Interpreter& in, const std::string& s, const std::string& m, CallArgs& a) {
  if (m == "startswith" || m == "endswith") {
    const Value* arg = a.get(0, "prefix");
    if (!arg) eval_fail(m + "() takes at least 1 argument");
    return Value(affix_match(s, *arg, m == "startswith"));
  }
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    const StripSide side = m == "strip" ? StripSide::kBoth : (m == "lstrip" ? StripSide::kLeft : StripSide::kRight);
    return Value(py_strip(s, args::get_str(a, 0, "chars"), side));
  }
  if (m == "split" || m == "rsplit") {
    const auto sep = args::get_str(a, 0, "sep");
    if (sep && sep->empty()) eval_fail("empty separator");
    return string_list(py_split(s, sep, args::get_int(a, 1, "maxsplit", -1), m == "rsplit"));
  }
  if (m == "splitlines") return string_list(py_splitlines(s, args::get_bool(a, 0, "keepends", false)));
  if (m == "upper") return Value(py_upper(s));
  if (m == "lower" || m == "casefold") return Value(py_lower(s));
  if (m == "title") return Value(py_title(s));
  if (m == "capitalize") return Value(py_capitalize(s));
  if (m == "replace") {
    const auto old = args::get_str(a, 0, "old");
    const auto repl = args::get_str(a, 1, "new");
    if (!old || !repl) eval_fail("replace() takes at least 2 arguments");
    std::string out = py_replace(s, *old, *repl, args::get_int(a, 2, "count", -1));
    in.check_size(out.size());
    return Value(std::move(out));
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex") {
    const auto sub = args::get_str(a, 0, "sub");
    if (!sub) eval_fail(m + "() takes at least 1 argument");
    const std::size_t p = (m == "find" || m == "index") ? s.find(*sub) : s.rfind(*sub);
    if (p == std::string::npos) {
      if (m == "index" || m == "rindex") eval_fail("substring not found");
      return Value(-1);
    }
    return Value(static_cast<int64_t>(py_len(std::string_view(s).substr(0, p))));
  }
  if (m == "count") {
    const auto sub = args::get_str(a, 0, "sub");
    if (!sub) eval_fail("count() takes at least 1 argument");
    return Value(static_cast<int64_t>(py_count(s, *sub)));
  }
  if (m == "join") {
    const Value* it = a.get(0, "iterable");
    if (!it) eval_fail("join() takes exactly one argument");
    const Value items = in.to_list(*it);
    std::string out;
    for (std::size_t i = 0; i < items.items().size(); ++i) {
      if (i) out += s;
      out += args::require_str(items.items()[i], "sequence item");
      in.check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (m == "format") {
    std::string out = str_format(s, a);
    in.check_size(out.size());
    return Value(std::move(out));
  }
  if (m == "removeprefix" || m == "removesuffix") {
    const auto x = args::get_str(a, 0, "affix");
    if (!x) eval_fail(m + "() takes exactly one argument");
    if (m == "removeprefix" && s.compare(0, x->size(), *x) == 0) return Value(s.substr(x->size()));
    if (m == "removesuffix" && x->size() <= s.size() && !x->empty() &&
        s.compare(s.size() - x->size(), x->size(), *x) == 0)
      return Value(s.substr(0, s.size() - x->size()));
    return Value(s);
  }
  if (m == "partition" || m == "rpartition") {
    const auto sep = args::get_str(a, 0, "sep");
    if (!sep || sep->empty()) eval_fail("empty separator");
    const std::size_t p = m == "partition" ? s.find(*sep) : s.rfind(*sep);
    if (p == std::string::npos)
      return m == "partition" ? Value::list({Value(s), Value(""), Value("")}, true)
                              : Value::list({Value(""), Value(""), Value(s)}, true);
    return Value::list({Value(s.substr(0, p)), Value(*sep), Value(s.substr(p + sep->size()))}, true);
  }
  if (m == "ljust" || m == "rjust" || m == "center" || m == "zfill") {
    const int64_t width = args::get_int(a, 0, "width", 0);
    in.check_size(static_cast<std::size_t>(std::max<int64_t>(0, width)));
    if (m == "zfill") {
      const auto len = static_cast<int64_t>(py_len(s));
      if (width <= len) return Value(s);
      const std::size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
      return Value(s.substr(0, sign) + std::string(static_cast<std::size_t>(width - len), '0') + s.substr(sign));
    }
    const std::string fill = args::get_str(a, 1, "fillchar").value_or(" ");
    if (py_len(fill) != 1) eval_fail("The fill character must be exactly one character long");
    if (m == "ljust") return Value(pad(s, width, fill, -1));
    if (m == "rjust") return Value(pad(s, width, fill, 1));
    const auto len = static_cast<int64_t>(py_len(s));
    if (width <= len) return Value(s);
    const int64_t total = width - len;
    const int64_t left = total / 2 + (total & width & 1);
    std::string l, r;
    for (int64_t i = 0; i < left; ++i) l += fill;
    for (int64_t i = 0; i < total - left; ++i) r += fill;
    return Value(l + s + r);
  }
  if (m == "isdigit" || m == "isdecimal" || m == "isnumeric") return Value(py_isdigit(s));
  if (m == "isalpha") return Value(py_isalpha(s));
  if (m == "isalnum") return Value(py_isalnum(s));
  if (m == "isspace") return Value(py_isspace(s));
  if (m == "isupper") return Value(py_isupper(s));
  if (m == "islower") return Value(py_islower(s));
  if (m == "isascii")
    return Value(std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
  eval_fail("str." + m + "() is not supported");
}

Value call_dict_method(const Value& d, const std::string& m, CallArgs& a) {
  if (m == "items") {
    std::vector<Value> pairs;
    for (const auto& [k, v] : d.dict_obj().items()) pairs.push_back(Value::list({k, v}, true));
    return Value::list(std::move(pairs));
  }
  if (m == "keys" || m == "values") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.dict_obj().items()) out.push_back(m == "keys" ? k : v);
    return Value::list(std::move(out));
  }
  if (m == "get") {
    const Value* key = a.get(0, "key");
    if (!key) eval_fail("get expected at least 1 argument, got 0");
    if (const Value* v = d.dict_obj().find(*key)) return *v;
    const Value* dflt = a.get(1, "default");
    return dflt ? *dflt : Value::none();
  }
  if (m == "copy") return d;
  eval_fail("access to attribute '" + m + "' of 'dict' object is unsafe");
}

Value call_list_method(const Value& l, const std::string& m, CallArgs& a) {
  if (m == "index" || m == "count") {
    const Value* x = a.get(0, "value");
    if (!x) eval_fail(m + "() takes at least 1 argument");
    int64_t count = 0;
    for (std::size_t i = 0; i < l.items().size(); ++i) {
      if (!l.items()[i].equals(*x)) continue;
      if (m == "index") return Value(static_cast<int64_t>(i));
      ++count;
    }
    if (m == "index") eval_fail(py_repr(*x) + " is not in list");
    return Value(count);
  }
  if (m == "copy") return Value::list(l.items());
  eval_fail("access to attribute '" + m + "' of '" + l.type_name() + "' object is unsafe");
}

}  // namespace

bool has_method(const Value& obj, std::string_view name) {
  switch (obj.type()) {
    case Value::Type::kString: return listed(kStrMethods, name);
    case Value::Type::kDict: return !obj.is_namespace() && listed(kDictMethods, name);
    case Value::Type::kList:
      return obj.list_obj().is_tuple ? listed(kTupleMethods, name) : listed(kListMethods, name);
    default: return false;
  }
}

Value call_method(Interpreter& in, const Value& obj, const std::string& name, CallArgs& args) {
  switch (obj.type()) {
    case Value::Type::kString: return call_str_method(in, obj.str(), name, args);
    case Value::Type::kDict: return call_dict_method(obj, name, args);
    case Value::Type::kList: return call_list_method(obj, name, args);
    default: break;
  }
  eval_fail("'" + obj.type_name() + "' object has no attribute '" + name + "'");
}

}  // namespace ds::chat
