// The filters of builtins.h, each following jinja2's implementation of the same name (and
// HF's override of tojson).
#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "model/chat/builtin_args.h"
#include "model/chat/builtins.h"
#include "model/chat/py_format.h"
#include "model/chat/py_string.h"

namespace ds::chat {
namespace {

using args::get;

// jinja2's make_attrgetter: "a.b.0" looks up item by item (an all-digit part is an index).
Value get_attribute_path(Interpreter& in, Value item, const std::string& path) {
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    item = digits && part.size() < 18 ? in.getitem(item, Value(static_cast<int64_t>(std::stoll(part))))
                                      : in.getitem(item, Value(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return item;
}

// The key a sorting filter compares: the item or its attribute, lower-cased unless
// case_sensitive.
Value sort_key(Interpreter& in, const Value& item, const std::optional<std::string>& attribute,
               bool case_sensitive) {
  Value v = attribute ? get_attribute_path(in, item, *attribute) : item;
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.str()));
  return v;
}

const std::vector<Value>& items_of(Interpreter& in, const Value& v, Value& holder) {
  holder = in.to_list(v);
  return holder.items();
}

Value f_abs(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) eval_fail("integer overflow");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  eval_fail("bad operand type for abs(): '" + v.type_name() + "'");
}

// attr() looks up a Python attribute only: a dict's keys are not attributes.
Value f_attr(Interpreter& in, const Value& v, CallArgs& a) {
  const auto name = args::get_str(a, 0, "name");
  if (!name) eval_fail("attr() needs an attribute name");
  if (v.is_dict() && !v.is_namespace() && !has_method(v, *name))
    return Value::undefined("'dict object' has no attribute '" + *name + "'");
  return in.getattr(v, *name);
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs&) { return Value(py_capitalize(py_str(v))); }

std::string center(const std::string& s, int64_t width) {
  const auto len = static_cast<int64_t>(py_len(s));
  if (width <= len) return s;
  const int64_t pad = width - len;
  // CPython's rule for which side gets the odd space.
  const int64_t left = pad / 2 + (pad & width & 1);
  return std::string(static_cast<std::size_t>(left), ' ') + s +
         std::string(static_cast<std::size_t>(pad - left), ' ');
}

Value f_center(Interpreter& in, const Value& v, CallArgs& a) {
  const int64_t width = args::get_int(a, 0, "width", 80);
  in.check_size(static_cast<std::size_t>(std::max<int64_t>(0, width)));
  return Value(center(py_str(v), width));
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  const Value* dflt = get(a, 0, "default_value");
  const bool boolean = args::get_bool(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !v.truthy())) return dflt ? *dflt : Value("");
  return v;
}

Value f_dictsort(Interpreter& in, const Value& v, CallArgs& a) {
  if (!v.is_dict() || v.is_namespace()) eval_fail("dictsort expects a mapping, got " + v.type_name());
  const bool case_sensitive = args::get_bool(a, 0, "case_sensitive", false);
  const std::string by = args::get_str(a, 1, "by").value_or("key");
  const bool reverse = args::get_bool(a, 2, "reverse", false);
  if (by != "key" && by != "value") eval_fail("You can only sort by either \"key\" or \"value\"");
  std::vector<Value> pairs;
  for (const auto& [k, val] : v.dict_obj().items()) pairs.push_back(Value::list({k, val}, true));
  const std::size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    const Value kx = sort_key(in, x.items()[pos], std::nullopt, case_sensitive);
    const Value ky = sort_key(in, y.items()[pos], std::nullopt, case_sensitive);
    return reverse ? py_less(ky, kx) : py_less(kx, ky);
  });
  return Value::list(std::move(pairs));
}

Value f_escape(Interpreter&, const Value& v, CallArgs&) {
  std::string out;
  for (const char c : py_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

Value f_first(Interpreter& in, const Value& v, CallArgs&) {
  if (v.is_list()) return v.items().empty() ? Value::undefined("No first item, sequence was empty.") : v.items().front();
  Value holder;
  const auto& items = items_of(in, v, holder);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter& in, const Value& v, CallArgs&) {
  Value holder;
  const auto& items = items_of(in, v, holder);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  const Value* dflt = get(a, 0, "default");
  const Value fallback = dflt ? *dflt : Value(0.0);
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    const auto d = py_parse_float(v.str());
    return d ? Value(*d) : fallback;
  }
  return fallback;
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  const Value* dflt = get(a, 0, "default");
  const Value fallback = dflt ? *dflt : Value(0);
  const int64_t base = args::get_int(a, 1, "base", 10);
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    const double f = v.as_float();
    if (!std::isfinite(f) || std::fabs(f) >= 9.2e18) return fallback;
    return Value(static_cast<int64_t>(f));
  }
  if (v.is_string()) {
    if (base == 0 || (base >= 2 && base <= 36))
      if (const auto i = py_parse_int(v.str(), static_cast<int>(base))) return Value(*i);
    const auto d = py_parse_float(v.str());
    if (d && std::isfinite(*d) && std::fabs(*d) < 9.2e18) return Value(static_cast<int64_t>(*d));
  }
  return fallback;
}

Value f_format(Interpreter& in, const Value& v, CallArgs& a) {
  const std::string& fmt = args::require_str(v, "format string");
  if (!a.keyword.empty()) {
    Value d = Value::dict();
    for (const auto& [k, val] : a.keyword) d.mutable_dict().set(Value(k), val);
    return Value(py_percent_format(in, fmt, d));
  }
  return Value(py_percent_format(in, fmt, Value::list(a.positional, true)));
}

Value f_indent(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* w = get(a, 0, "width");
  std::string indention = "    ";
  if (w && w->is_string()) {
    indention = w->str();
  } else if (w && !w->is_undefined()) {
    const int64_t n = args::get_int(a, 0, "width", 4);
    in.check_size(static_cast<std::size_t>(std::max<int64_t>(0, n)));
    indention = std::string(static_cast<std::size_t>(std::max<int64_t>(0, n)), ' ');
  }
  const bool first = args::get_bool(a, 1, "first", false);
  const bool blank = args::get_bool(a, 2, "blank", false);
  const std::string s = py_str(v) + "\n";
  const auto lines = py_splitlines(s, false);
  std::string rv;
  if (blank) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? std::string() : lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
    }
  }
  if (first) rv = indention + rv;
  in.check_size(rv.size());
  return Value(std::move(rv));
}

Value f_items(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict() || v.is_namespace()) eval_fail("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  pairs.reserve(v.dict_obj().size());
  for (const auto& [k, val] : v.dict_obj().items()) pairs.push_back(Value::list({k, val}, true));
  return Value::list(std::move(pairs));
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  const std::string sep = args::get_str(a, 0, "d").value_or("");
  const auto attribute = args::get_str(a, 1, "attribute");
  Value holder;
  const auto& items = items_of(in, v, holder);
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += py_str(attribute ? get_attribute_path(in, items[i], *attribute) : items[i]);
    in.check_size(out.size());
  }
  return Value(std::move(out));
}

Value f_length(Interpreter&, const Value& v, CallArgs&) { return Value(py_length(v)); }

Value f_list(Interpreter& in, const Value& v, CallArgs&) {
  Value l = in.to_list(v);
  return Value::list(l.items());
}

Value f_lower(Interpreter&, const Value& v, CallArgs&) { return Value(py_lower(py_str(v))); }
Value f_upper(Interpreter&, const Value& v, CallArgs&) { return Value(py_upper(py_str(v))); }
Value f_title(Interpreter&, const Value& v, CallArgs&) { return Value(py_title(py_str(v))); }

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  Value holder;
  const auto& items = items_of(in, v, holder);
  std::vector<Value> out;
  out.reserve(items.size());
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (const auto& [k, val] : a.keyword) {
    if (k == "attribute") attribute = &val;
    if (k == "default") dflt = &val;
  }
  if (attribute) {
    const std::string& path = args::require_str(*attribute, "map attribute");
    for (const Value& item : items) {
      Value r = get_attribute_path(in, item, path);
      out.push_back(r.is_undefined() && dflt ? *dflt : r);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty()) eval_fail("map requires a filter name or attribute=");
  const std::string& filter = args::require_str(a.positional[0], "map filter name");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : items) {
    CallArgs copy = rest;
    out.push_back(in.apply_filter(filter, item, copy));
  }
  return Value::list(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  const bool case_sensitive = args::get_bool(a, 0, "case_sensitive", false);
  const auto attribute = args::get_str(a, 1, "attribute");
  Value holder;
  const auto& items = items_of(in, v, holder);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  const Value* best = &items[0];
  Value best_key = sort_key(in, items[0], attribute, case_sensitive);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(in, items[i], attribute, case_sensitive);
    if (want_max ? py_less(best_key, k) : py_less(k, best_key)) {
      best = &items[i];
      best_key = std::move(k);
    }
  }
  return *best;
}

Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }
Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }

// select / reject / selectattr / rejectattr.
Value select_impl(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  Value holder;
  const auto& items = items_of(in, v, holder);
  std::size_t next = 0;
  std::optional<std::string> attribute;
  if (by_attr) {
    if (a.positional.empty()) eval_fail("selectattr/rejectattr need an attribute name");
    attribute = args::require_str(a.positional[next++], "attribute name");
  }
  std::optional<std::string> test;
  if (next < a.positional.size()) test = args::require_str(a.positional[next++], "test name");
  CallArgs test_args;
  test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(next), a.positional.end());
  test_args.keyword = a.keyword;
  std::vector<Value> out;
  for (const Value& item : items) {
    const Value subject = attribute ? get_attribute_path(in, item, *attribute) : item;
    bool ok;
    if (test) {
      CallArgs copy = test_args;
      ok = in.apply_test(*test, subject, copy);
    } else {
      ok = subject.truthy();
    }
    if (ok == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
  const auto old = args::get_str(a, 0, "old");
  const auto repl = args::get_str(a, 1, "new");
  if (!old || !repl) eval_fail("replace() needs old and new strings");
  const int64_t count = args::get_int(a, 2, "count", -1);
  std::string out = py_replace(py_str(v), *old, *repl, count);
  in.check_size(out.size());
  return Value(std::move(out));
}

Value f_reverse(Interpreter& in, const Value& v, CallArgs&) {
  if (v.is_string()) {
    auto chars = py_chars(v.str());
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return Value(std::move(out));
  }
  Value holder;
  const auto& items = items_of(in, v, holder);
  return Value::list(std::vector<Value>(items.rbegin(), items.rend()));
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  const int64_t precision = args::get_int(a, 0, "precision", 0);
  const std::string method = args::get_str(a, 1, "method").value_or("common");
  if (!v.is_number()) eval_fail("round() needs a number, got " + v.type_name());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_float() * scale;
  double r;
  if (method == "common") {
    r = std::nearbyint(x);  // Python's round(): half to even
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else if (method == "floor") {
    r = std::floor(x);
  } else {
    eval_fail("method must be common, ceil or floor");
  }
  if (v.is_float() || method != "common") return Value(r / scale);
  return Value(static_cast<int64_t>(r / scale));
}

Value f_safe(Interpreter&, const Value& v, CallArgs&) { return v; }

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
  const bool reverse = args::get_bool(a, 0, "reverse", false);
  const bool case_sensitive = args::get_bool(a, 1, "case_sensitive", false);
  const auto attribute = args::get_str(a, 2, "attribute");
  Value holder;
  std::vector<Value> items = items_of(in, v, holder);
  std::vector<std::pair<Value, std::size_t>> keyed;
  keyed.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i)
    keyed.emplace_back(sort_key(in, items[i], attribute, case_sensitive), i);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? py_less(y.first, x.first) : py_less(x.first, y.first);
  });
  std::vector<Value> out;
  out.reserve(items.size());
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  return Value::list(std::move(out));
}

Value f_string(Interpreter&, const Value& v, CallArgs&) { return Value(py_str(v)); }

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  const auto attribute = args::get_str(a, 0, "attribute");
  const Value* start = get(a, 1, "start");
  Value total = start ? *start : Value(0);
  Value holder;
  for (const Value& item : items_of(in, v, holder)) {
    const Value x = attribute ? get_attribute_path(in, item, *attribute) : item;
    if (!x.is_number() || !total.is_number())
      eval_fail("unsupported operand type(s) for +: '" + total.type_name() + "' and '" + x.type_name() + "'");
    if (total.is_float() || x.is_float()) {
      total = Value(total.as_float() + x.as_float());
    } else {
      int64_t r;
      if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) eval_fail("integer overflow");
      total = Value(r);
    }
  }
  return total;
}

JsonOptions json_options(const CallArgs& a) {
  JsonOptions o;
  o.ensure_ascii = args::get_bool(a, 0, "ensure_ascii", false);
  if (const Value* indent = get(a, 1, "indent"); indent && !indent->is_none() && !indent->is_undefined()) {
    if (indent->is_string()) {
      o.indent = indent->str();
    } else if (indent->is_int()) {
      o.indent = std::string(static_cast<std::size_t>(std::clamp<int64_t>(indent->as_int(), 0, 64)), ' ');
    } else {
      eval_fail("tojson indent must be an integer or a string");
    }
    o.item_separator = ",";
  }
  if (const Value* seps = get(a, 2, "separators"); seps && !seps->is_none() && !seps->is_undefined()) {
    if (!seps->is_list() || seps->items().size() != 2 || !seps->items()[0].is_string() ||
        !seps->items()[1].is_string())
      eval_fail("tojson separators must be a pair of strings");
    o.item_separator = seps->items()[0].str();
    o.key_separator = seps->items()[1].str();
  }
  o.sort_keys = args::get_bool(a, 3, "sort_keys", false);
  return o;
}

Value f_tojson(Interpreter& in, const Value& v, CallArgs& a) {
  std::string out = py_json_dumps(v, json_options(a));
  in.check_size(out.size());
  return Value(std::move(out));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  return Value(py_strip(py_str(v), args::get_str(a, 0, "chars"), StripSide::kBoth));
}

Value f_truncate(Interpreter&, const Value& v, CallArgs& a) {
  const std::string s = py_str(v);
  const int64_t length = args::get_int(a, 0, "length", 255);
  const bool killwords = args::get_bool(a, 1, "killwords", false);
  const std::string end = args::get_str(a, 2, "end").value_or("...");
  const int64_t leeway = args::get_int(a, 3, "leeway", 5);
  const auto end_len = static_cast<int64_t>(py_len(end));
  if (length < end_len) eval_fail("expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (leeway < 0) eval_fail("expected leeway >= 0, got " + std::to_string(leeway));
  const auto chars = py_chars(s);
  if (static_cast<int64_t>(chars.size()) <= length + leeway) return Value(s);
  std::string head;
  for (int64_t i = 0; i < length - end_len; ++i) head += chars[static_cast<std::size_t>(i)];
  if (killwords) return Value(head + end);
  const std::size_t sp = head.rfind(' ');
  if (sp != std::string::npos) head.resize(sp);
  return Value(head + end);
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
  const bool case_sensitive = args::get_bool(a, 0, "case_sensitive", false);
  const auto attribute = args::get_str(a, 1, "attribute");
  Value holder;
  std::vector<Value> out;
  std::vector<Value> seen;
  for (const Value& item : items_of(in, v, holder)) {
    const Value key = sort_key(in, item, attribute, case_sensitive);
    bool dup = false;
    for (const Value& s : seen)
      if (s.equals(key)) {
        dup = true;
        break;
      }
    if (dup) continue;
    in.count_step();
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs&) {
  // jinja2 counts matches of \w+.
  int64_t n = 0;
  bool in_word = false;
  for (const std::string& c : py_chars(py_str(v))) {
    const bool w = py_isalnum(c) || c == "_";
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

struct FilterSpec {
  FilterFn fn;
  std::vector<std::string_view> params;  // after the input; checked unless variadic
  bool variadic = false;
};

const std::unordered_map<std::string_view, FilterSpec>& filter_table() {
  static const std::unordered_map<std::string_view, FilterSpec> table = {
      {"abs", {f_abs, {}}},
      {"attr", {f_attr, {"name"}}},
      {"capitalize", {f_capitalize, {}}},
      {"center", {f_center, {"width"}}},
      {"count", {f_length, {}}},
      {"d", {f_default, {"default_value", "boolean"}}},
      {"default", {f_default, {"default_value", "boolean"}}},
      {"dictsort", {f_dictsort, {"case_sensitive", "by", "reverse"}}},
      {"e", {f_escape, {}}},
      {"escape", {f_escape, {}}},
      {"first", {f_first, {}}},
      {"float", {f_float, {"default"}}},
      {"format", {f_format, {}, true}},
      {"indent", {f_indent, {"width", "first", "blank"}}},
      {"int", {f_int, {"default", "base"}}},
      {"items", {f_items, {}}},
      {"join", {f_join, {"d", "attribute"}}},
      {"last", {f_last, {}}},
      {"length", {f_length, {}}},
      {"list", {f_list, {}}},
      {"lower", {f_lower, {}}},
      {"map", {f_map, {}, true}},
      {"max", {f_max, {"case_sensitive", "attribute"}}},
      {"min", {f_min, {"case_sensitive", "attribute"}}},
      {"reject", {f_reject, {}, true}},
      {"rejectattr", {f_rejectattr, {}, true}},
      {"replace", {f_replace, {"old", "new", "count"}}},
      {"reverse", {f_reverse, {}}},
      {"round", {f_round, {"precision", "method"}}},
      {"safe", {f_safe, {}}},
      {"select", {f_select, {}, true}},
      {"selectattr", {f_selectattr, {}, true}},
      {"sort", {f_sort, {"reverse", "case_sensitive", "attribute"}}},
      {"string", {f_string, {}}},
      {"sum", {f_sum, {"attribute", "start"}}},
      {"title", {f_title, {}}},
      {"tojson", {f_tojson, {"ensure_ascii", "indent", "separators", "sort_keys"}}},
      {"trim", {f_trim, {"chars"}}},
      {"truncate", {f_truncate, {"length", "killwords", "end", "leeway"}}},
      {"unique", {f_unique, {"case_sensitive", "attribute"}}},
      {"upper", {f_upper, {}}},
      {"wordcount", {f_wordcount, {}}},
  };
  return table;
}

// Python's own argument check for a call of the filter function.
Value checked_call(const FilterSpec& spec, std::string_view name, Interpreter& in, const Value& v,
                   CallArgs& a) {
  if (!spec.variadic) {
    const std::size_t max = spec.params.size();
    if (a.positional.size() > max)
      eval_fail("filter '" + std::string(name) + "' takes at most " + std::to_string(max) +
                " argument(s) (" + std::to_string(a.positional.size()) + " given)");
    for (const auto& [k, val] : a.keyword) {
      const auto it = std::find(spec.params.begin(), spec.params.end(), k);
      if (it == spec.params.end())
        eval_fail("filter '" + std::string(name) + "' got an unexpected keyword argument '" + k + "'");
      if (static_cast<std::size_t>(it - spec.params.begin()) < a.positional.size())
        eval_fail("filter '" + std::string(name) + "' got multiple values for argument '" + k + "'");
    }
  }
  return spec.fn(in, v, a);
}

}  // namespace

bool has_filter(std::string_view name) { return filter_table().count(name) != 0; }

Value call_filter(Interpreter& in, std::string_view name, const Value& input, CallArgs& args) {
  const auto& t = filter_table();
  const auto it = t.find(name);
  if (it == t.end()) eval_fail("no filter named '" + std::string(name) + "'");
  return checked_call(it->second, name, in, input, args);
}

}  // namespace ds::chat
