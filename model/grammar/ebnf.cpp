// GBNF-like grammar text -> Grammar (ebnf.h). A recursive-descent parser over the text.
#include "model/grammar/ebnf.h"

#include <unordered_map>

#include "model/grammar/utf8_class.h"
#include "model/tokenizer/utf8.h"

namespace ds::grammar {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Grammar run(std::string_view root_name) {
    skip_space();
    while (pos_ < s_.size()) {
      const size_t at = pos_;
      const std::string name = parse_name();
      if (name.empty()) fail("expected a rule name");
      skip_space();
      if (!consume("::=")) fail("expected '::=' after rule name '" + name + "'");
      const int32_t id = rule_id(name);
      if (defined_.count(name)) fail_at(at, "rule '" + name + "' is defined twice");
      defined_.emplace(name, true);
      g_.set_body(id, parse_alternatives(0));
      skip_space();
    }
    for (const Rule& r : g_.rules())
      if (!defined_.count(r.name)) throw GrammarError("grammar: rule '" + r.name + "' is used but not defined");
    const auto found = ids_.find(std::string(root_name));
    const int32_t root = found == ids_.end() ? -1 : found->second;
    if (root < 0) throw GrammarError("grammar: no rule named '" + std::string(root_name) + "'");
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw GrammarError("grammar: " + what + " at line " + std::to_string(line) + ", column " + std::to_string(col));
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }

  void skip_space() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  bool consume(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) != lit) return false;
    pos_ += lit.size();
    return true;
  }
  std::string parse_name() {
    const size_t b = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(b, pos_ - b));
  }
  // A name followed by ::= starts the next rule.
  bool at_rule_start() {
    const size_t save = pos_;
    const std::string name = parse_name();
    skip_space();
    const bool yes = !name.empty() && s_.substr(pos_, 3) == "::=";
    pos_ = save;
    return yes;
  }
  // A map, not Grammar::find_rule's scan: a grammar of 100,000 rules stays linear to read.
  int32_t rule_id(const std::string& name) {
    auto [it, inserted] = ids_.emplace(name, 0);
    if (inserted) it->second = g_.add_rule(name);
    return it->second;
  }

  // Depth-bounded recursion: parentheses nest at most kMaxGroupDepth deep.
  static constexpr int kMaxGroupDepth = 200;
  ExprPtr parse_alternatives(int depth) {
    if (depth > kMaxGroupDepth) fail("parentheses nested more than " + std::to_string(kMaxGroupDepth) + " deep");
    std::vector<ExprPtr> alts{parse_sequence(depth)};
    for (;;) {
      skip_space();
      if (!consume("|")) break;
      alts.push_back(parse_sequence(depth));
    }
    return alt(std::move(alts));
  }

  ExprPtr parse_sequence(int depth) {
    std::vector<ExprPtr> items;
    for (;;) {
      skip_space();
      if (pos_ >= s_.size()) break;
      const char c = s_[pos_];
      if (c == '|' || c == ')') break;
      if (is_name_char(c) && at_rule_start()) break;
      items.push_back(parse_postfix(parse_atom(depth)));
    }
    return seq(std::move(items));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      if (pos_ >= s_.size()) return e;
      const char c = s_[pos_];
      if (c == '*') {
        ++pos_;
        e = star(e);
      } else if (c == '+') {
        ++pos_;
        e = plus(e);
      } else if (c == '?') {
        ++pos_;
        e = optional(e);
      } else if (c == '{') {
        ++pos_;
        skip_space();
        const int32_t lo = parse_int();
        int32_t hi = lo;
        skip_space();
        if (consume(",")) {
          skip_space();
          hi = (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ? parse_int() : -1;
          skip_space();
        }
        if (!consume("}")) fail("expected '}' to close a repetition");
        if (hi >= 0 && hi < lo) fail("repetition {" + std::to_string(lo) + "," + std::to_string(hi) + "} is empty");
        e = repeat(e, lo, hi);
      } else {
        return e;
      }
    }
  }

  int32_t parse_int() {
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') fail("expected a number");
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + (s_[pos_++] - '0');
      if (v > kMaxRepeat) fail("repetition counts above " + std::to_string(kMaxRepeat) + " are not supported");
    }
    return static_cast<int32_t>(v);
  }

  ExprPtr parse_atom(int depth) {
    const char c = s_[pos_];
    if (c == '"' || c == '\'') return parse_literal(c);
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return utf8_expr(CodepointSet::all());
    }
    if (c == '(') {
      ++pos_;
      ExprPtr e = parse_alternatives(depth + 1);
      skip_space();
      if (!consume(")")) fail("expected ')'");
      return e;
    }
    if (is_name_char(c)) return rule_ref(rule_id(parse_name()));
    fail(std::string("unexpected character '") + c + "'");
  }

  // One character of a literal or class: a UTF-8 code point or an escape.
  char32_t parse_char() {
    if (pos_ >= s_.size()) fail("unterminated literal or class");
    if (s_[pos_] == '\\') {
      ++pos_;
      if (pos_ >= s_.size()) fail("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'f': return '\f';
        case 'v': return '\v';
        case '0': return 0;
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: return static_cast<unsigned char>(e);
      }
    }
    char32_t cp = 0;
    const size_t n = tok::utf8::decode_one(s_, pos_, cp);
    if (n == 0) fail("invalid UTF-8");
    pos_ += n;
    return cp;
  }
  char32_t parse_hex(int digits) {
    char32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= s_.size()) fail("short hex escape");
      const char h = s_[pos_++];
      int d = -1;
      if (h >= '0' && h <= '9') d = h - '0';
      if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
      if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
      if (d < 0) fail("bad hex escape");
      v = v * 16 + static_cast<char32_t>(d);
    }
    if (v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) fail("escape is not a Unicode scalar value");
    return v;
  }

  ExprPtr parse_literal(char quote) {
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != quote) tok::utf8::append(out, parse_char());
    if (!consume(std::string_view(&quote, 1))) fail("unterminated literal");
    return bytes(out);
  }

  ExprPtr parse_class() {
    ++pos_;
    const bool negate = consume("^");
    CodepointSet set;
    while (pos_ < s_.size() && s_[pos_] != ']') {
      const char32_t lo = parse_char();
      char32_t hi = lo;
      if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("class range out of order");
      }
      set.add(lo, hi);
    }
    if (!consume("]")) fail("unterminated class");
    return utf8_expr(negate ? set.complement() : set);
  }

  std::string_view s_;
  size_t pos_ = 0;
  Grammar g_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<std::string, bool> defined_;
};

}  // namespace

Grammar parse_ebnf(std::string_view text, std::string_view root_rule) { return Parser(text).run(root_rule); }

}  // namespace ds::grammar
