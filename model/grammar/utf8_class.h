// Classes of code points, and their UTF-8 form as a byte-level expression.
//
// A CodepointSet is a sorted list of disjoint ranges of Unicode scalar values (surrogates
// D800..DFFF are never members: they have no UTF-8 encoding). utf8_expr() turns one into the
// alternatives of byte-range sequences that encode exactly its members, as RE2 and Rust's
// regex-syntax do: a range is split where its members change encoded length, then where its
// first and last members stop sharing leading bytes, so each piece is a sequence of byte
// ranges. [^"\\] for example becomes 5 pieces (ASCII and four multi-byte forms).
#pragma once

#include <cstdint>
#include <vector>

#include "model/grammar/grammar.h"

namespace ds::grammar {

inline constexpr char32_t kMaxCodepoint = 0x10FFFF;

class CodepointSet {
 public:
  struct Range {
    char32_t lo, hi;  // inclusive
  };

  CodepointSet() = default;
  static CodepointSet all();  // every scalar value
  static CodepointSet of(char32_t lo, char32_t hi);

  void add(char32_t cp) { add(cp, cp); }
  void add(char32_t lo, char32_t hi);
  void add(const CodepointSet& other);
  CodepointSet complement() const;
  CodepointSet intersect(const CodepointSet& other) const;
  CodepointSet minus(const CodepointSet& other) const { return intersect(other.complement()); }
  bool contains(char32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<Range>& ranges() const { return ranges_; }

 private:
  void normalize();
  std::vector<Range> ranges_;
};

// The UTF-8 encodings of the members of `set`, as one expression (nothing() when empty).
ExprPtr utf8_expr(const CodepointSet& set);

}  // namespace ds::grammar
