// Python str operations on UTF-8 strings, working on code points as Python does: case
// mapping (utf8proc's simple mappings), strip with Python's notion of white space, split,
// replace, find and count, and the character classes of str.isdigit() and friends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds::chat {

// The code points of `s`, each as its own UTF-8 string.
std::vector<std::string> py_chars(std::string_view s);
std::size_t py_len(std::string_view s);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);

enum class StripSide { kBoth, kLeft, kRight };
// str.strip(chars): without `chars`, Python white space.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, StripSide side);

// str.split(sep, maxsplit) / str.rsplit; sep nullopt = runs of white space.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit, bool from_right);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
// str.replace(old, new, count); count < 0 = all.
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count);
std::size_t py_count(std::string_view s, std::string_view sub);

bool py_isdigit(std::string_view s);
bool py_isalpha(std::string_view s);
bool py_isalnum(std::string_view s);
bool py_isspace(std::string_view s);
bool py_isupper(std::string_view s);
bool py_islower(std::string_view s);

// Python float(str) for the forms templates meet (decimal, exponent, inf/nan, surrounding
// white space, underscores between digits); nullopt where Python raises.
std::optional<double> py_parse_float(const std::string& raw);
// Python int(str, base) (base 0: from the prefix), for values that fit 64 bits; nullopt where
// Python raises or the value does not fit.
std::optional<int64_t> py_parse_int(const std::string& raw, int base);

}  // namespace ds::chat
