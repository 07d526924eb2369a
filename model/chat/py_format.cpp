#include "model/chat/py_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <utf8proc.h>

#include "model/chat/template_error.h"
#include "model/tokenizer/utf8.h"

namespace ds::chat {
namespace {

constexpr int kMaxDepth = 512;

bool py_printable(char32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp < 0x7F) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

void append_hex(std::string& out, const char* prefix, unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%0*x", digits, value);
  out += prefix;
  out += buf;
}

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    std::size_t len = ds::tok::utf8::decode_one(s, i, cp);
    if (!len) {  // not produced by valid input; show the byte
      append_hex(out, "\\x", static_cast<unsigned char>(s[i]), 2);
      ++i;
      continue;
    }
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (py_printable(cp)) {
      out.append(s, i, len);
    } else if (cp <= 0xFF) {
      append_hex(out, "\\x", cp, 2);
    } else if (cp <= 0xFFFF) {
      append_hex(out, "\\u", cp, 4);
    } else {
      append_hex(out, "\\U", cp, 8);
    }
    i += len;
  }
  out += quote;
  return out;
}

void repr_into(std::string& out, const Value& v, int depth);

void str_into(std::string& out, const Value& v, int depth) {
  if (v.is_string()) {
    out += v.str();
  } else {
    repr_into(out, v, depth);
  }
}

void repr_into(std::string& out, const Value& v, int depth) {
  if (depth > kMaxDepth) throw TemplateRuntimeError("value nested too deeply to print");
  switch (v.type()) {
    case Value::Type::kUndefined: out += "Undefined"; return;
    case Value::Type::kNone: out += "None"; return;
    case Value::Type::kBool: out += v.as_bool() ? "True" : "False"; return;
    case Value::Type::kInt: out += std::to_string(v.as_int()); return;
    case Value::Type::kFloat: out += py_float_repr(v.as_float()); return;
    case Value::Type::kString: out += repr_string(v.str()); return;
    case Value::Type::kList: {
      const bool tuple = v.list_obj().is_tuple;
      out += tuple ? '(' : '[';
      const auto& items = v.items();
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        repr_into(out, items[i], depth + 1);
      }
      if (tuple && items.size() == 1) out += ',';
      out += tuple ? ')' : ']';
      return;
    }
    case Value::Type::kDict: {
      if (v.is_namespace()) out += "<Namespace ";
      out += '{';
      bool first = true;
      for (const auto& [k, val] : v.dict_obj().items()) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, k, depth + 1);
        out += ": ";
        repr_into(out, val, depth + 1);
      }
      out += '}';
      if (v.is_namespace()) out += '>';
      return;
    }
    case Value::Type::kCallable:
      out += "<function " + v.callable().name + ">";
      return;
  }
}

void json_into(std::string& out, const Value& v, const JsonOptions& o, int depth);

void json_newline(std::string& out, const JsonOptions& o, int depth) {
  out += '\n';
  for (int i = 0; i < depth; ++i) out += *o.indent;
}

std::string json_key(const Value& k) {
  switch (k.type()) {
    case Value::Type::kString: return k.str();
    case Value::Type::kBool: return k.as_bool() ? "true" : "false";
    case Value::Type::kNone: return "null";
    case Value::Type::kInt: return std::to_string(k.as_int());
    case Value::Type::kFloat: return py_float_repr(k.as_float());
    default:
      throw TemplateRuntimeError("keys must be str, int, float, bool or None, not " +
                                 k.type_name());
  }
}

void json_into(std::string& out, const Value& v, const JsonOptions& o, int depth) {
  if (depth > kMaxDepth) throw TemplateRuntimeError("value nested too deeply for tojson");
  switch (v.type()) {
    case Value::Type::kNone: out += "null"; return;
    case Value::Type::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Type::kInt: out += std::to_string(v.as_int()); return;
    case Value::Type::kFloat: {
      const double f = v.as_float();
      if (std::isnan(f)) out += "NaN";
      else if (std::isinf(f)) out += f > 0 ? "Infinity" : "-Infinity";
      else out += py_float_repr(f);
      return;
    }
    case Value::Type::kString: json_quote(out, v.str(), o.ensure_ascii); return;
    case Value::Type::kList: {
      const auto& items = v.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.indent) json_newline(out, o, depth + 1);
        json_into(out, items[i], o, depth + 1);
      }
      if (o.indent) json_newline(out, o, depth);
      out += ']';
      return;
    }
    case Value::Type::kDict: {
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, val] : v.dict_obj().items()) entries.emplace_back(json_key(k), &val);
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      if (entries.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (std::size_t i = 0; i < entries.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.indent) json_newline(out, o, depth + 1);
        json_quote(out, entries[i].first, o.ensure_ascii);
        out += o.key_separator;
        json_into(out, *entries[i].second, o, depth + 1);
      }
      if (o.indent) json_newline(out, o, depth);
      out += '}';
      return;
    }
    case Value::Type::kUndefined:
      throw TemplateRuntimeError("Object of type Undefined is not JSON serializable");
    case Value::Type::kCallable:
      throw TemplateRuntimeError("Object of type function is not JSON serializable");
  }
}

}  // namespace

void json_quote(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      default: break;
    }
    if (c < 0x20) {
      append_hex(out, "\\u", c, 4);
      ++i;
      continue;
    }
    if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    char32_t cp = 0;
    const std::size_t len = ds::tok::utf8::decode_one(s, i, cp);
    if (!len) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    if (cp >= 0x10000) {
      const char32_t v = cp - 0x10000;
      append_hex(out, "\\u", 0xD800 + (v >> 10), 4);
      append_hex(out, "\\u", 0xDC00 + (v & 0x3FF), 4);
    } else {
      append_hex(out, "\\u", cp, 4);
    }
    i += len;
  }
  out += '"';
}

std::string py_float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0.0) return std::signbit(f) ? "-0.0" : "0.0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const std::size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(e + 1));
  const int decpt = exp + 1;  // position of the decimal point relative to the digits
  const int n = static_cast<int>(digits.size());
  std::string out = sign;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<std::size_t>(-decpt), '0') + digits;
    } else if (decpt >= n) {
      out += digits + std::string(static_cast<std::size_t>(decpt - n), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(decpt)) + "." +
             digits.substr(static_cast<std::size_t>(decpt));
    }
  } else {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += ebuf;
  }
  return out;
}

std::string py_str(const Value& v) {
  if (v.is_string()) return v.str();
  if (v.is_undefined()) return "";
  std::string out;
  str_into(out, v, 0);
  return out;
}

std::string py_repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

std::string py_json_dumps(const Value& v, const JsonOptions& options) {
  std::string out;
  json_into(out, v, options, 0);
  return out;
}

}  // namespace ds::chat
