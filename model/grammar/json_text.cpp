// JSON lexical expressions (json_text.h).
#include "model/grammar/json_text.h"

#include <algorithm>
#include <cmath>

namespace ds::grammar {
namespace {

ExprPtr digit() { return byte_range('0', '9'); }

ExprPtr hex_digit() {
  ByteSet s;
  for (int c = '0'; c <= '9'; ++c) s.set(static_cast<size_t>(c));
  for (int c = 'a'; c <= 'f'; ++c) s.set(static_cast<size_t>(c));
  for (int c = 'A'; c <= 'F'; ++c) s.set(static_cast<size_t>(c));
  return byte_set(s);
}

ExprPtr chars_of(std::string_view cs) {
  ByteSet s;
  for (char c : cs) s.set(static_cast<unsigned char>(c));
  return byte_set(s);
}

int num_digits(int64_t v) {
  int n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

int64_t pow10(int n) {
  int64_t p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

// Digit strings of one length from a to b (a <= b), first digit by first digit.
ExprPtr digits_range(const std::string& a, const std::string& b) {
  if (a.empty()) return empty();
  const std::string ra = a.substr(1), rb = b.substr(1);
  if (a[0] == b[0]) return seq({bytes(a.substr(0, 1)), digits_range(ra, rb)});
  const size_t rest = ra.size();
  const bool a_low = std::all_of(ra.begin(), ra.end(), [](char c) { return c == '0'; });
  const bool b_high = std::all_of(rb.begin(), rb.end(), [](char c) { return c == '9'; });
  std::vector<ExprPtr> alts;
  char lo = a[0], hi = b[0];
  if (!a_low) {
    alts.push_back(seq({bytes(a.substr(0, 1)), digits_range(ra, std::string(rest, '9'))}));
    ++lo;
  }
  if (!b_high) {
    alts.push_back(seq({bytes(b.substr(0, 1)), digits_range(std::string(rest, '0'), rb)}));
    --hi;
  }
  if (lo <= hi)
    alts.push_back(seq({byte_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)),
                        repeat(digit(), static_cast<int32_t>(rest), static_cast<int32_t>(rest))}));
  return alt(std::move(alts));
}

// Decimal text (no sign, no leading zeros) of [a, b], 0 <= a <= b.
ExprPtr nonneg_range(int64_t a, int64_t b) {
  std::vector<ExprPtr> alts;
  for (int len = num_digits(a); len <= num_digits(b); ++len) {
    const int64_t x = std::max(a, len == 1 ? int64_t{0} : pow10(len - 1));
    const int64_t y = std::min(b, pow10(len) - 1);
    if (x <= y) alts.push_back(digits_range(std::to_string(x), std::to_string(y)));
  }
  return alt(std::move(alts));
}

int64_t clamp_int(double v) {
  if (v >= static_cast<double>(kMaxJsonInteger)) return kMaxJsonInteger + 1;
  if (v <= -static_cast<double>(kMaxJsonInteger)) return -kMaxJsonInteger - 1;
  return static_cast<int64_t>(v);
}

}  // namespace

ExprPtr json_ws(const JsonWhitespace& ws) {
  if (ws.none) return empty();
  return alt({empty(), bytes(" "), seq({bytes("\n"), repeat(chars_of(" \t"), 0, ws.max_indent)})});
}

ExprPtr json_chars(const CodepointSet& set, bool lt_raw) {
  // One character that JSON writes as itself: its UTF-8 bytes (utf8_expr's own fast path).
  if (set.ranges().size() == 1 && set.ranges()[0].lo == set.ranges()[0].hi) {
    const char32_t cp = set.ranges()[0].lo;
    if (cp >= 0x20 && cp != '"' && cp != '\\' && (lt_raw || cp != '<')) return utf8_expr(set);
  }
  CodepointSet raw = set.intersect(CodepointSet::of(0x20, kMaxCodepoint));
  CodepointSet special;
  special.add('"');
  special.add('\\');
  if (!lt_raw) special.add('<');
  raw = raw.minus(special);
  std::vector<ExprPtr> alts{utf8_expr(raw)};
  if (!lt_raw && set.contains('<')) alts.push_back(bytes("\\u003c"));
  if (set.contains('"')) alts.push_back(bytes("\\\""));
  if (set.contains('\\')) alts.push_back(bytes("\\\\"));
  static const char* hex = "0123456789abcdef";
  const CodepointSet controls = set.intersect(CodepointSet::of(0, 0x1F));
  for (const CodepointSet::Range& r : controls.ranges()) {
    for (char32_t c = r.lo; c <= r.hi; ++c) {
      switch (c) {
        case '\b': alts.push_back(bytes("\\b")); break;
        case '\f': alts.push_back(bytes("\\f")); break;
        case '\n': alts.push_back(bytes("\\n")); break;
        case '\r': alts.push_back(bytes("\\r")); break;
        case '\t': alts.push_back(bytes("\\t")); break;
        default: {
          std::string e = "\\u00";
          e += hex[c >> 4];
          e += hex[c & 15];
          alts.push_back(bytes(e));
        }
      }
    }
  }
  return alt(std::move(alts));
}

ExprPtr json_any_char(bool lt_raw) {
  auto build = [](bool lt) {
    CodepointSet printable = CodepointSet::of(0x20, kMaxCodepoint);
    CodepointSet special;
    special.add('"');
    special.add('\\');
    if (!lt) special.add('<');
    const ExprPtr h = hex_digit();
    const ExprPtr non_surrogate = alt({
        seq({chars_of("0123456789abcABC"), h, h, h}),
        seq({chars_of("dD"), byte_range('0', '7'), h, h}),
        seq({chars_of("efEF"), h, h, h}),
    });
    const ExprPtr pair = seq({chars_of("dD"), chars_of("89abAB"), h, h, bytes("\\u"), chars_of("dD"),
                              chars_of("cdefCDEF"), h, h});
    return alt({utf8_expr(printable.minus(special)), seq({bytes("\\"), chars_of("\"\\/bfnrt")}),
                seq({bytes("\\u"), alt({non_surrogate, pair})})});
  };
  static const ExprPtr with_lt = build(true), without_lt = build(false);
  return lt_raw ? with_lt : without_lt;
}

ExprPtr json_string(int32_t min_chars, int32_t max_chars, bool lt_raw) {
  return seq({bytes("\""), repeat(json_any_char(lt_raw), min_chars, max_chars), bytes("\"")});
}

ExprPtr json_integer_range(int64_t lo, int64_t hi) {
  lo = std::max(lo, -kMaxJsonInteger);
  hi = std::min(hi, kMaxJsonInteger);
  if (lo > hi) return nothing();
  std::vector<ExprPtr> alts;
  if (lo < 0) alts.push_back(seq({bytes("-"), nonneg_range(std::max<int64_t>(1, -std::min<int64_t>(hi, -1)), -lo)}));
  if (hi >= 0) alts.push_back(nonneg_range(std::max<int64_t>(lo, 0), hi));
  return alt(std::move(alts));
}

ExprPtr json_integer() {
  static const ExprPtr e = seq({optional(bytes("-")),
                                alt({bytes("0"), seq({byte_range('1', '9'), repeat(digit(), 0, 17)})})});
  return e;
}

ExprPtr json_number() {
  static const ExprPtr e = seq({json_integer(), optional(seq({bytes("."), plus(digit())})),
                                optional(seq({chars_of("eE"), optional(chars_of("+-")), repeat(digit(), 1, 2)}))});
  return e;
}

ExprPtr json_number_range(const NumberBounds& b, bool integer) {
  for (const std::optional<double>& v : {b.lo, b.hi})
    if (v && !std::isfinite(*v)) throw GrammarError("bounds must be finite numbers");
  // Integers in range.
  const int64_t ilo = b.lo ? clamp_int(b.lo_exclusive ? std::floor(*b.lo) + 1 : std::ceil(*b.lo)) : -kMaxJsonInteger;
  const int64_t ihi = b.hi ? clamp_int(b.hi_exclusive ? std::ceil(*b.hi) - 1 : std::floor(*b.hi)) : kMaxJsonInteger;
  std::vector<ExprPtr> alts{json_integer_range(ilo, ihi)};
  if (!integer) {
    const ExprPtr fraction = seq({bytes("."), plus(digit())});
    // i.F with [i, i + 1) inside the range.
    const int64_t plo = std::max<int64_t>(0, ilo);
    const int64_t phi = b.hi ? clamp_int(std::floor(*b.hi)) - 1 : kMaxJsonInteger;
    if (plo <= phi) alts.push_back(seq({json_integer_range(plo, phi), fraction}));
    // -i.F with (-(i + 1), -i] inside the range.
    const int64_t nhi = b.lo ? clamp_int(std::floor(-*b.lo)) - 1 : kMaxJsonInteger;
    const int64_t nlo = std::max<int64_t>(
        0, b.hi ? clamp_int(b.hi_exclusive ? std::floor(-*b.hi) + 1 : std::ceil(-*b.hi)) : int64_t{0});
    if (nlo <= nhi) alts.push_back(seq({bytes("-"), json_integer_range(nlo, nhi), fraction}));
  }
  ExprPtr e = alt(std::move(alts));
  if (e->kind == Expr::Kind::alt && e->items.empty())
    throw GrammarError(integer ? "no integer satisfies the bounds"
                               : "the bounds leave no integer and no whole unit interval (not supported)");
  return e;
}

ExprPtr json_literal(const std::string& text, bool lt_raw) {
  if (lt_raw || text.find('<') == std::string::npos) return bytes(text);
  std::string out;
  for (char c : text) out += c == '<' ? std::string("\\u003c") : std::string(1, c);
  return bytes(out);
}

}  // namespace ds::grammar
