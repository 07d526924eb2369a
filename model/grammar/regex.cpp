// Regex subset -> expression (regex.h). A recursive-descent parser over code points.
#include "model/grammar/regex.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/grammar/json_text.h"
#include "model/grammar/utf8_class.h"
#include "model/tokenizer/utf8.h"

namespace ds::grammar {
namespace {

CodepointSet digits() { return CodepointSet::of('0', '9'); }

CodepointSet word() {
  CodepointSet s = CodepointSet::of('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_');
  return s;
}

// ECMAScript's WhiteSpace and LineTerminator.
CodepointSet space() {
  CodepointSet s;
  for (char32_t c : {U'\t', U'\n', U'\v', U'\f', U'\r', U' ', U'\u00a0', U'\u1680', U'\u2028', U'\u2029', U'\u202f',
                     U'\u205f', U'\u3000', U'\ufeff'})
    s.add(c);
  s.add(0x2000, 0x200A);
  return s;
}

CodepointSet dot() {
  CodepointSet terminators;
  for (char32_t c : {U'\n', U'\r', U'\u2028', U'\u2029'}) terminators.add(c);
  return terminators.complement();
}

class Parser {
 public:
  Parser(std::string_view p, RegexMode mode, bool lt_raw, const CompileBudget* budget)
      : p_(p), mode_(mode), lt_raw_(lt_raw), budget_(budget) {}

  ExprPtr run() {
    const bool anchored_start = peek_is('^');
    if (anchored_start) ++pos_;
    // A trailing unescaped $ anchors the end.
    bool anchored_end = false;
    size_t end = p_.size();
    if (end > pos_ && p_[end - 1] == '$') {
      size_t backslashes = 0;
      for (size_t i = end - 1; i > pos_ && p_[i - 1] == '\\'; --i) ++backslashes;
      if (backslashes % 2 == 0) {
        anchored_end = true;
        --end;
      }
    }
    p_ = p_.substr(0, end);
    ExprPtr e = parse_alternatives(0);
    if (pos_ < p_.size()) fail(p_[pos_] == ')' ? "unbalanced ')'" : "unexpected character");
    if (mode_ != RegexMode::whole_text) {
      CodepointSet chars = CodepointSet::all();
      if (mode_ == RegexMode::tag_text_search) chars = chars.minus(CodepointSet::of('<', '<'));
      const ExprPtr any = star(encode(chars));
      e = seq({anchored_start ? empty() : any, e, anchored_end ? empty() : any});
    }
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw GrammarError("regex: " + what + " at offset " + std::to_string(pos_));
  }
  bool peek_is(char c) const { return pos_ < p_.size() && p_[pos_] == c; }

  // Draws on the compile's budget every kCheckEvery units of work (an atom is 1, a new
  // distinct class kClassCost: encoding one is ~100x the work of reading a character).
  static constexpr int64_t kCheckEvery = 4096, kClassCost = 64;
  void spend(int64_t units) {
    work_ += units;
    if (budget_ && work_ >= next_check_) {
      next_check_ = work_ + kCheckEvery;
      budget_->check(CompileStage::parse);
    }
  }

  // One expression per distinct character set, shared wherever the pattern repeats it (a
  // negated class in a JSON string is ~40 nodes; 10,000 of them need not be 400,000).
  ExprPtr encode(const CodepointSet& s) {
    std::vector<std::pair<char32_t, char32_t>> key;
    for (const CodepointSet::Range& r : s.ranges()) key.emplace_back(r.lo, r.hi);
    auto [it, inserted] = encoded_.try_emplace(std::move(key));
    if (inserted) spend(kClassCost);
    if (inserted) it->second = mode_ == RegexMode::json_string_search ? json_chars(s, lt_raw_) : utf8_expr(s);
    return it->second;
  }
  std::map<std::vector<std::pair<char32_t, char32_t>>, ExprPtr> encoded_;

  // Depth-bounded recursion: groups nest at most kMaxGroupDepth deep.
  static constexpr int kMaxGroupDepth = 200;
  ExprPtr parse_alternatives(int depth) {
    if (depth > kMaxGroupDepth) fail("groups nested more than " + std::to_string(kMaxGroupDepth) + " deep");
    std::vector<ExprPtr> alts{parse_sequence(depth)};
    while (peek_is('|')) {
      ++pos_;
      alts.push_back(parse_sequence(depth));
    }
    return alt(std::move(alts));
  }

  ExprPtr parse_sequence(int depth) {
    std::vector<ExprPtr> items;
    while (pos_ < p_.size() && p_[pos_] != '|' && p_[pos_] != ')') items.push_back(parse_quantified(depth));
    return seq(std::move(items));
  }

  ExprPtr parse_quantified(int depth) {
    spend(1);
    ExprPtr e = parse_atom(depth);
    if (pos_ >= p_.size()) return e;
    const char c = p_[pos_];
    int32_t lo = 0, hi = -1;
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_;
      lo = 1;
    } else if (c == '?') {
      ++pos_;
      hi = 1;
    } else if (c == '{' && quantifier_follows()) {
      ++pos_;
      lo = parse_int();
      hi = lo;
      if (peek_is(',')) {
        ++pos_;
        hi = peek_is('}') ? -1 : parse_int();
      }
      if (!peek_is('}')) fail("expected '}'");
      ++pos_;
      if (hi >= 0 && hi < lo) fail("quantifier {" + std::to_string(lo) + "," + std::to_string(hi) + "} is empty");
    } else {
      return e;
    }
    if (peek_is('?')) ++pos_;  // lazy: same language
    // ECMAScript allows one quantifier per atom (a** is a syntax error): refusing the second
    // keeps a chain of 100,000 quantifiers from becoming as many nested repetitions.
    if (pos_ < p_.size() &&
        (p_[pos_] == '*' || p_[pos_] == '+' || p_[pos_] == '?' || (p_[pos_] == '{' && quantifier_follows())))
      fail("a quantifier cannot follow another quantifier (nothing to repeat)");
    return repeat(e, lo, hi);
  }

  // ECMAScript treats a '{' that does not start {n}, {n,} or {n,m} as a literal.
  bool quantifier_follows() const {
    size_t i = pos_ + 1;
    const size_t d0 = i;
    while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') ++i;
    if (i == d0) return false;
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') ++i;
    }
    return i < p_.size() && p_[i] == '}';
  }

  int32_t parse_int() {
    int64_t v = 0;
    const size_t b = pos_;
    while (pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '9') {
      v = v * 10 + (p_[pos_++] - '0');
      if (v > kMaxRepeat) fail("repetition counts above " + std::to_string(kMaxRepeat) + " are not supported");
    }
    if (pos_ == b) fail("expected a number");
    return static_cast<int32_t>(v);
  }

  ExprPtr parse_atom(int depth) {
    const char c = p_[pos_];
    switch (c) {
      case '(': {
        ++pos_;
        if (peek_is('?')) {
          ++pos_;
          if (peek_is(':')) {
            ++pos_;
          } else if (peek_is('<') && pos_ + 1 < p_.size() && p_[pos_ + 1] != '=' && p_[pos_ + 1] != '!') {
            while (pos_ < p_.size() && p_[pos_] != '>') ++pos_;
            if (!peek_is('>')) fail("unterminated group name");
            ++pos_;
          } else if (peek_is('=') || peek_is('!') || peek_is('<')) {
            fail("lookaround assertions ((?=, (?!, (?<=, (?<!) are not supported");
          } else {
            fail("inline modifiers such as (?i) are not supported (spell the cases out, e.g. [aA])");
          }
        }
        ExprPtr e = parse_alternatives(depth + 1);
        if (!peek_is(')')) fail("missing ')'");
        ++pos_;
        return e;
      }
      case '.': ++pos_; return encode(dot());
      case '[': return encode(parse_class());
      case '^':
      case '$': fail("anchors are only supported at the start and end of the pattern");
      case '*':
      case '+':
      case '?': fail("nothing to repeat");
      case '\\': {
        ++pos_;
        CodepointSet s;
        if (parse_escape(false, s)) return encode(s);
        fail("bad escape");
      }
      default: {
        char32_t cp = 0;
        const size_t n = tok::utf8::decode_one(p_, pos_, cp);
        if (n == 0) fail("invalid UTF-8");
        pos_ += n;
        CodepointSet s;
        s.add(cp);
        return encode(s);
      }
    }
  }

  // After a backslash: a class escape or one character, into `out`. In a class, \b is
  // backspace.
  bool parse_escape(bool in_class, CodepointSet& out) {
    if (pos_ >= p_.size()) fail("pattern ends with a backslash");
    const char e = p_[pos_++];
    switch (e) {
      case 'd': out.add(digits()); return true;
      case 'D': out.add(digits().complement()); return true;
      case 'w': out.add(word()); return true;
      case 'W': out.add(word().complement()); return true;
      case 's': out.add(space()); return true;
      case 'S': out.add(space().complement()); return true;
      case 'n': out.add('\n'); return true;
      case 'r': out.add('\r'); return true;
      case 't': out.add('\t'); return true;
      case 'f': out.add('\f'); return true;
      case 'v': out.add('\v'); return true;
      case '0': out.add(0); return true;
      case 'x': out.add(parse_hex(2)); return true;
      case 'u': {
        if (peek_is('{')) {
          ++pos_;
          char32_t v = 0;
          int n = 0;
          while (pos_ < p_.size() && p_[pos_] != '}') {
            v = v * 16 + hex_value(p_[pos_++]);
            if (++n > 6 || v > kMaxCodepoint) fail("\\u{...} is not a code point");
          }
          if (!peek_is('}') || n == 0) fail("bad \\u{...}");
          ++pos_;
          out.add(v);
          return true;
        }
        out.add(parse_hex(4));
        return true;
      }
      case 'b':
        if (in_class) {
          out.add('\b');
          return true;
        }
        fail("word boundaries are not supported");
      case 'B': fail("word boundaries are not supported");
      case 'p':
      case 'P': fail("Unicode property escapes are not supported");
      case 'c': fail("control escapes are not supported");
      default:
        if (e >= '1' && e <= '9') fail("backreferences are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) fail(std::string("unknown escape \\") + e);
        out.add(static_cast<unsigned char>(e));
        return true;
    }
  }

  char32_t hex_value(char h) const {
    if (h >= '0' && h <= '9') return static_cast<char32_t>(h - '0');
    if (h >= 'a' && h <= 'f') return static_cast<char32_t>(h - 'a' + 10);
    if (h >= 'A' && h <= 'F') return static_cast<char32_t>(h - 'A' + 10);
    fail("bad hex digit");
  }
  char32_t parse_hex(int n) {
    char32_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (pos_ >= p_.size()) fail("short hex escape");
      v = v * 16 + hex_value(p_[pos_++]);
    }
    return v;
  }

  // One class member: a character (or escape) and the set it stands for.
  bool class_atom(CodepointSet& set, char32_t& single) {
    if (p_[pos_] == '\\') {
      ++pos_;
      CodepointSet s;
      parse_escape(true, s);
      set = s;
      const auto& r = s.ranges();
      if (r.size() == 1 && r[0].lo == r[0].hi) {
        single = r[0].lo;
        return true;
      }
      return false;
    }
    char32_t cp = 0;
    const size_t n = tok::utf8::decode_one(p_, pos_, cp);
    if (n == 0) fail("invalid UTF-8");
    pos_ += n;
    set = CodepointSet::of(cp, cp);
    single = cp;
    return true;
  }

  CodepointSet parse_class() {
    ++pos_;
    const bool negate = peek_is('^');
    if (negate) ++pos_;
    CodepointSet out;
    while (pos_ < p_.size() && p_[pos_] != ']') {
      CodepointSet a;
      char32_t lo = 0;
      const bool a_single = class_atom(a, lo);
      if (a_single && pos_ + 1 < p_.size() && p_[pos_] == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        CodepointSet b;
        char32_t hi = 0;
        if (!class_atom(b, hi)) fail("a class range needs single characters");
        if (hi < lo) fail("class range out of order");
        out.add(lo, hi);
      } else {
        out.add(a);
      }
    }
    if (!peek_is(']')) fail("unterminated class");
    ++pos_;
    return negate ? out.complement() : out;
  }

  std::string_view p_;
  size_t pos_ = 0;
  RegexMode mode_;
  bool lt_raw_;
  const CompileBudget* budget_;
  int64_t work_ = 0, next_check_ = 0;
};

}  // namespace

ExprPtr regex_expr(std::string_view pattern, RegexMode mode, bool lt_raw, const CompileBudget* budget) {
  // Request input: bounded before any work (a pattern's size sets the expression's).
  if (pattern.size() > kMaxRegexBytes)
    throw GrammarError("regex: the pattern is " + std::to_string(pattern.size()) + " bytes, more than the limit of " +
                       std::to_string(kMaxRegexBytes));
  return Parser(pattern, mode, lt_raw, budget).run();
}

}  // namespace ds::grammar
