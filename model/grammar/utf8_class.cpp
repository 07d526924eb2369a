// CodepointSet and its UTF-8 byte-range expansion (utf8_class.h).
#include "model/grammar/utf8_class.h"

#include <algorithm>
#include <string>

#include "model/tokenizer/utf8.h"

namespace ds::grammar {
namespace {

constexpr char32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

int encoded_length(char32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(char32_t cp, uint8_t out[4]) {
  switch (encoded_length(cp)) {
    case 1: out[0] = static_cast<uint8_t>(cp); break;
    case 2:
      out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    case 3:
      out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    default:
      out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  }
}

// [lo, hi] of one encoded length: split until lo and hi differ only in bytes where the range
// covers every continuation value below the first differing byte, then emit byte ranges.
void split_same_length(char32_t lo, char32_t hi, std::vector<ExprPtr>& out) {
  const int n = encoded_length(lo);
  for (int i = 1; i < n; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  std::vector<ExprPtr> parts;
  for (int i = 0; i < n; ++i) parts.push_back(byte_range(a[i], b[i]));
  out.push_back(seq(std::move(parts)));
}

}  // namespace

CodepointSet CodepointSet::all() {
  CodepointSet s;
  s.add(0, kMaxCodepoint);
  return s;
}

CodepointSet CodepointSet::of(char32_t lo, char32_t hi) {
  CodepointSet s;
  s.add(lo, hi);
  return s;
}

void CodepointSet::add(char32_t lo, char32_t hi) {
  if (hi > kMaxCodepoint) hi = kMaxCodepoint;
  if (lo > hi) return;
  // Surrogates are not scalar values.
  if (lo <= kSurrogateHi && hi >= kSurrogateLo) {
    if (lo < kSurrogateLo) ranges_.push_back({lo, kSurrogateLo - 1});
    if (hi > kSurrogateHi) ranges_.push_back({kSurrogateHi + 1, hi});
  } else {
    ranges_.push_back({lo, hi});
  }
  normalize();
}

void CodepointSet::add(const CodepointSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  normalize();
}

void CodepointSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.lo < b.lo; });
  std::vector<Range> merged;
  for (const Range& r : ranges_) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1)
      merged.back().hi = std::max(merged.back().hi, r.hi);
    else
      merged.push_back(r);
  }
  ranges_ = std::move(merged);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet s;
  char32_t next = 0;
  for (const Range& r : ranges_) {
    if (r.lo > next) s.add(next, r.lo - 1);
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) s.add(next, kMaxCodepoint);
  return s;
}

CodepointSet CodepointSet::intersect(const CodepointSet& other) const {
  CodepointSet s;
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    const char32_t lo = std::max(ranges_[i].lo, other.ranges_[j].lo);
    const char32_t hi = std::min(ranges_[i].hi, other.ranges_[j].hi);
    if (lo <= hi) s.ranges_.push_back({lo, hi});
    if (ranges_[i].hi < other.ranges_[j].hi)
      ++i;
    else
      ++j;
  }
  return s;
}

bool CodepointSet::contains(char32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), cp, [](char32_t c, const Range& r) { return c < r.lo; });
  return it != ranges_.begin() && std::prev(it)->hi >= cp;
}

ExprPtr utf8_expr(const CodepointSet& set) {
  // One character (a pattern's literal, the common case): its own bytes, without splitting
  // ranges (a 100 KB pattern of literals otherwise spends seconds here before the compile's
  // budget starts).
  if (set.ranges().size() == 1 && set.ranges()[0].lo == set.ranges()[0].hi) {
    const char32_t cp = set.ranges()[0].lo;
    if (cp < 0xD800 || (cp > 0xDFFF && cp <= kMaxCodepoint)) {
      std::string s;
      tok::utf8::append(s, cp);
      return bytes(s);
    }
  }
  std::vector<ExprPtr> out;
  for (const CodepointSet::Range& r : set.ranges()) {
    char32_t lo = r.lo;
    for (char32_t edge : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}, kMaxCodepoint}) {
      if (lo > r.hi) break;
      if (lo > edge) continue;
      const char32_t hi = std::min(r.hi, edge);
      split_same_length(lo, hi, out);
      lo = hi + 1;
    }
  }
  return alt(std::move(out));
}

}  // namespace ds::grammar
