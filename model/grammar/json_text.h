// The lexical pieces of JSON as grammar expressions, shared by the JSON Schema compiler
// (json_schema.h), the regex front end (for schema patterns) and the tool-call grammar.
//
// Numbers are kept within what every JSON parser reads exactly: integers have at most 18
// digits (so they fit int64 and uint64 alike; a longer one becomes a float in some parsers
// and fails an "integer" check), exponents at most 2 digits. Strings are valid UTF-8; a
// character is either itself or, for `"`, `\` and control characters (which must be escaped),
// one escape; any \uXXXX escape is allowed when the content is free, surrogates only in pairs
// (a lone one is refused by strict parsers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/grammar/grammar.h"
#include "model/grammar/utf8_class.h"

namespace ds::grammar {

// The largest magnitude an integer may have (18 digits).
inline constexpr int64_t kMaxJsonInteger = 999'999'999'999'999'999;

// Whitespace between JSON tokens. Bounded, so that a sampler at high temperature cannot fill
// max_tokens with it: nothing, one space, or a newline and up to max_indent spaces or tabs.
struct JsonWhitespace {
  int32_t max_indent = 16;
  // Nothing at all between tokens (compact JSON).
  bool none = false;
};
ExprPtr json_ws(const JsonWhitespace& ws);

// The encodings, inside a JSON string, of the characters in `set`: each as itself, or as its
// required escape (\" \\ \b \f \n \r \t, \u00XX for other control characters). With
// lt_raw false, '<' is written \u003c, never as itself (JSON inside XML-like tags, where a raw
// "</tag>" in a string would end the tag).
ExprPtr json_chars(const CodepointSet& set, bool lt_raw = true);
// One character of free string content: json_chars(everything), plus any \uXXXX escape.
ExprPtr json_any_char(bool lt_raw = true);
// A whole string (quotes included) of min..max characters (max < 0: unbounded).
ExprPtr json_string(int32_t min_chars = 0, int32_t max_chars = -1, bool lt_raw = true);

// Decimal text of the integers in [lo, hi] (clamped to +-kMaxJsonInteger); nothing() if empty.
ExprPtr json_integer_range(int64_t lo, int64_t hi);
ExprPtr json_integer();
// Any number (fraction and exponent optional).
ExprPtr json_number();
// Numbers in a range, written without an exponent: integers in range, and decimals whose
// whole unit interval lies in range (conservative: a range narrower than 1 around a
// non-integer, e.g. [0.2, 0.8], is refused with GrammarError).
struct NumberBounds {
  std::optional<double> lo, hi;
  bool lo_exclusive = false, hi_exclusive = false;
};
ExprPtr json_number_range(const NumberBounds& b, bool integer);

// Exactly this JSON text (a const or enum value, already serialised); with lt_raw false,
// every '<' (which JSON text only holds inside strings) written \u003c.
ExprPtr json_literal(const std::string& text, bool lt_raw = true);

}  // namespace ds::grammar
