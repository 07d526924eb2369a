#include "model/chat/py_string.h"

#include <utf8proc.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "model/chat/lexer.h"
#include "model/tokenizer/utf8.h"

namespace ds::chat {

namespace utf8 = ds::tok::utf8;

namespace {

std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t len = utf8::decode_one(s, i, cp);
    out.push_back(len ? cp : utf8::kReplacement);
    i += len ? len : 1;
  }
  return out;
}

std::string encode(const std::vector<char32_t>& cps, std::size_t begin, std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end; ++i) utf8::append(out, cps[i]);
  return out;
}

bool is_cased_letter(char32_t cp) {
  const auto c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}

bool is_alpha(char32_t cp) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
      return true;
    default:
      return false;
  }
}

bool is_digit(char32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp)) == UTF8PROC_CATEGORY_ND;
}

bool is_numeric(char32_t cp) {
  const auto c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

template <class Pred>
bool all_of_nonempty(std::string_view s, Pred pred) {
  const auto cps = code_points(s);
  if (cps.empty()) return false;
  for (const char32_t cp : cps)
    if (!pred(cp)) return false;
  return true;
}

bool is_line_break(char32_t cp) {
  switch (cp) {
    case '\n': case '\r': case 0x0B: case 0x0C: case 0x1C: case 0x1D: case 0x1E: case 0x85:
    case 0x2028: case 0x2029:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::vector<std::string> py_chars(std::string_view s) {
  std::vector<std::string> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t len = utf8::decode_one(s, i, cp);
    out.emplace_back(s.substr(i, len ? len : 1));
    i += len ? len : 1;
  }
  return out;
}

std::size_t py_len(std::string_view s) { return utf8::length(s); }

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char32_t cp : code_points(s))
    utf8::append(out, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))));
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char32_t cp : code_points(s))
    utf8::append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
  return out;
}

std::string py_capitalize(std::string_view s) {
  const auto cps = code_points(s);
  std::string out;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    const auto cp = static_cast<utf8proc_int32_t>(cps[i]);
    utf8::append(out, static_cast<char32_t>(i == 0 ? utf8proc_totitle(cp) : utf8proc_tolower(cp)));
  }
  return out;
}

std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (const char32_t cp : code_points(s)) {
    const auto c = static_cast<utf8proc_int32_t>(cp);
    utf8::append(out, static_cast<char32_t>(prev_cased ? utf8proc_tolower(c) : utf8proc_totitle(c)));
    prev_cased = is_cased_letter(cp);
  }
  return out;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, StripSide side) {
  const auto cps = code_points(s);
  std::vector<char32_t> set;
  if (chars) set = code_points(*chars);
  const auto strip_it = [&](char32_t cp) {
    if (!chars) return is_py_space(cp);
    for (const char32_t c : set)
      if (c == cp) return true;
    return false;
  };
  std::size_t b = 0, e = cps.size();
  if (side != StripSide::kRight)
    while (b < e && strip_it(cps[b])) ++b;
  if (side != StripSide::kLeft)
    while (e > b && strip_it(cps[e - 1])) --e;
  return encode(cps, b, e);
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (!sep) {
    const auto cps = code_points(s);
    // Words are runs of non-space; maxsplit limits the number of cuts.
    std::vector<std::pair<std::size_t, std::size_t>> words;
    std::size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && is_py_space(cps[i])) ++i;
      if (i >= cps.size()) break;
      std::size_t j = i;
      while (j < cps.size() && !is_py_space(cps[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    if (maxsplit < 0 || static_cast<std::size_t>(maxsplit) + 1 >= words.size()) {
      for (const auto& [b, e] : words) out.push_back(encode(cps, b, e));
      return out;
    }
    const auto cuts = static_cast<std::size_t>(maxsplit);
    if (!from_right) {
      for (std::size_t k = 0; k < cuts; ++k) out.push_back(encode(cps, words[k].first, words[k].second));
      out.push_back(encode(cps, words[cuts].first, cps.size()));
    } else {
      const std::size_t first = words.size() - cuts;
      out.push_back(encode(cps, 0, words[first - 1].second));
      for (std::size_t k = first; k < words.size(); ++k)
        out.push_back(encode(cps, words[k].first, words[k].second));
    }
    return out;
  }
  const std::string& d = *sep;
  if (!from_right) {
    std::size_t start = 0;
    int64_t cuts = 0;
    while (maxsplit < 0 || cuts < maxsplit) {
      const std::size_t p = s.find(d, start);
      if (p == std::string_view::npos) break;
      out.emplace_back(s.substr(start, p - start));
      start = p + d.size();
      ++cuts;
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  std::vector<std::string> rev;
  std::size_t end = s.size();
  int64_t cuts = 0;
  while (maxsplit < 0 || cuts < maxsplit) {
    if (end < d.size()) break;
    const std::size_t p = s.rfind(d, end - d.size());
    if (p == std::string_view::npos) break;
    rev.emplace_back(s.substr(p + d.size(), end - p - d.size()));
    end = p;
    ++cuts;
  }
  rev.emplace_back(s.substr(0, end));
  return {rev.rbegin(), rev.rend()};
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  const auto cps = code_points(s);
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (!is_line_break(cps[i])) continue;
    std::size_t end = i + 1;
    if (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') end = i + 2;
    out.push_back(encode(cps, start, keepends ? end : i));
    start = end;
    i = end - 1;
  }
  if (start < cps.size()) out.push_back(encode(cps, start, cps.size()));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every character and at the end.
    const auto chars = py_chars(s);
    int64_t done = 0;
    for (const std::string& c : chars) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      out += c;
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  std::size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const std::size_t p = s.find(old, start);
    if (p == std::string_view::npos) break;
    out.append(s.substr(start, p - start));
    out.append(repl);
    start = p + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

std::size_t py_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return py_len(s) + 1;
  std::size_t n = 0;
  for (std::size_t p = s.find(sub); p != std::string_view::npos; p = s.find(sub, p + sub.size())) ++n;
  return n;
}

bool py_isdigit(std::string_view s) { return all_of_nonempty(s, is_digit); }
bool py_isalpha(std::string_view s) { return all_of_nonempty(s, is_alpha); }
bool py_isalnum(std::string_view s) {
  return all_of_nonempty(s, [](char32_t cp) { return is_alpha(cp) || is_numeric(cp); });
}
bool py_isspace(std::string_view s) { return all_of_nonempty(s, is_py_space); }

bool py_isupper(std::string_view s) {
  bool cased = false;
  for (const char32_t cp : code_points(s)) {
    if (utf8proc_islower(static_cast<utf8proc_int32_t>(cp))) return false;
    if (utf8proc_isupper(static_cast<utf8proc_int32_t>(cp))) cased = true;
  }
  return cased;
}

bool py_islower(std::string_view s) {
  bool cased = false;
  for (const char32_t cp : code_points(s)) {
    if (utf8proc_isupper(static_cast<utf8proc_int32_t>(cp))) return false;
    if (utf8proc_islower(static_cast<utf8proc_int32_t>(cp))) cased = true;
  }
  return cased;
}

// Python float(str) for the forms templates meet: decimal, exponent, inf/nan, surrounding
// white space, underscores between digits.
std::optional<double> py_parse_float(const std::string& raw) {
  std::string s = py_strip(raw, std::nullopt, StripSide::kBoth);
  std::string t;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 1])))
      continue;
    t += s[i];
  }
  if (t.empty()) return std::nullopt;
  std::string lower = py_lower(t);
  std::string_view body = lower;
  double sign = 1.0;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    sign = body[0] == '-' ? -1.0 : 1.0;
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") return sign * INFINITY;
  if (body == "nan") return NAN;
  for (const char c : body)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-'))
      return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return d;
}

std::optional<int64_t> py_parse_int(const std::string& raw, int base) {
  std::string s = py_strip(raw, std::nullopt, StripSide::kBoth);
  std::string t;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size()) continue;
    t += s[i];
  }
  if (t.empty()) return std::nullopt;
  std::size_t i = 0;
  bool neg = false;
  if (t[0] == '+' || t[0] == '-') {
    neg = t[0] == '-';
    ++i;
  }
  if (i >= t.size()) return std::nullopt;
  // Python accepts the prefix of the base (and base 0 picks the base from the prefix).
  if (i + 1 < t.size() && t[i] == '0') {
    const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(t[i + 1])));
    const int prefixed = p == 'x' ? 16 : (p == 'o' ? 8 : (p == 'b' ? 2 : 0));
    if (prefixed && (base == prefixed || base == 0)) {
      base = prefixed;
      i += 2;
    }
  }
  if (base == 0) base = 10;
  if (i >= t.size()) return std::nullopt;
  int64_t value = 0;
  for (; i < t.size(); ++i) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(t[i])));
    int d = c >= '0' && c <= '9' ? c - '0' : (c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99);
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, d, &value))
      return std::nullopt;
  }
  return neg ? -value : value;
}

}  // namespace ds::chat
