// Regular expressions (ECMAScript syntax, the subset that describes a regular language) as
// grammar expressions: what `guided_regex` / `structured_outputs.regex` ask the whole output
// to match, and what a JSON Schema `pattern` asks a string's value to contain.
//
// Supported: literals and escapes (\n \r \t \f \v \0 \xHH \uHHHH \u{H..} and escaped syntax
// characters), `.` (any character but line terminators), classes [a-z] [^...] with \d \w \s
// \D \W \S inside or outside them, groups ( ) (?: ) (?<name> ), alternatives |, quantifiers
// * + ? {n} {n,} {n,m} (lazy forms match the same strings), ^ at the start and $ at the end.
// Refused with GrammarError: backreferences, lookaround, \b \B word boundaries, \p{..}
// properties, anchors anywhere else. Characters are code points (the `u` flag's view).
#pragma once

#include <string_view>

#include "model/grammar/budget.h"
#include "model/grammar/grammar.h"

namespace ds::grammar {

enum class RegexMode : uint8_t {
  // The text is exactly one match (anchors are allowed and change nothing).
  whole_text,
  // The JSON-encoded content of a string whose value contains a match (JSON Schema's
  // `pattern` is not anchored): unanchored ends allow any characters before and after, and
  // every character is written as json_chars() encodes it.
  json_string_search,
  // Raw text inside an XML-like tag (a tool-call parameter) whose value contains a match:
  // unanchored ends allow any characters but '<', so no closing tag appears by accident.
  tag_text_search,
};

// A pattern longer than this is refused (GrammarError) before it is parsed: patterns are
// request input, and each class costs up to tens of expression nodes.
inline constexpr size_t kMaxRegexBytes = 256 * 1024;

// lt_raw: in json_string_search mode, whether '<' may be written as itself (json_chars).
// budget: the compile's (budget.h), checked as the pattern is read (stage parse), so a pattern
// of many distinct classes stops at the compile's time limit or its client's cancellation.
ExprPtr regex_expr(std::string_view pattern, RegexMode mode, bool lt_raw = true, const CompileBudget* budget = nullptr);

}  // namespace ds::grammar
