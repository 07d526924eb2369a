// Expression builders and the Grammar container (grammar.h).
#include "model/grammar/grammar.h"

#include <algorithm>
#include <cstdio>
#include <unordered_set>

namespace ds::grammar {
namespace {

ExprPtr make(Expr e) {
  int32_t below = 0;
  for (const ExprPtr& it : e.items) below = std::max(below, it->depth);
  if (e.item) below = std::max(below, e.item->depth);
  if (e.extra) below = std::max(below, e.extra->depth);
  e.depth = below + 1;
  if (e.depth > kMaxExprDepth)
    throw GrammarError("grammar: expressions nested more than " + std::to_string(kMaxExprDepth) +
                       " levels deep (groups, repetitions of repetitions or nested schemas) are not supported");
  return std::make_shared<const Expr>(std::move(e));
}

bool is_nothing(const ExprPtr& e) { return e->kind == Expr::Kind::alt && e->items.empty(); }

}  // namespace

std::vector<std::pair<uint8_t, uint8_t>> byte_ranges(const ByteSet& set) {
  std::vector<std::pair<uint8_t, uint8_t>> out;
  for (int b = 0; b < 256; ++b) {
    if (!set.test(static_cast<size_t>(b))) continue;
    int hi = b;
    while (hi + 1 < 256 && set.test(static_cast<size_t>(hi + 1))) ++hi;
    out.emplace_back(static_cast<uint8_t>(b), static_cast<uint8_t>(hi));
    b = hi;
  }
  return out;
}

ExprPtr empty() {
  static const ExprPtr e = make(Expr{});
  return e;
}

ExprPtr nothing() {
  static const ExprPtr e = [] {
    Expr x;
    x.kind = Expr::Kind::alt;
    return make(std::move(x));
  }();
  return e;
}

ExprPtr bytes(std::string_view text) {
  if (text.empty()) return empty();
  Expr e;
  e.kind = Expr::Kind::bytes;
  e.text = std::string(text);
  return make(std::move(e));
}

ExprPtr byte_set(const ByteSet& set) {
  if (set.none()) return nothing();
  if (set.count() == 1) {
    for (int b = 0; b < 256; ++b)
      if (set.test(static_cast<size_t>(b))) return bytes(std::string(1, static_cast<char>(b)));
  }
  Expr e;
  e.kind = Expr::Kind::byte_set;
  e.set = set;
  return make(std::move(e));
}

ExprPtr byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(static_cast<size_t>(b));
  return byte_set(s);
}

ExprPtr seq(std::vector<ExprPtr> items) {
  std::vector<ExprPtr> flat;
  std::string pending;  // adjacent literals are merged into one
  auto flush = [&] {
    if (!pending.empty()) flat.push_back(bytes(pending));
    pending.clear();
  };
  for (ExprPtr& it : items) {
    if (!it) throw GrammarError("grammar: null expression in a sequence");
    if (is_nothing(it)) return nothing();
    if (it->kind == Expr::Kind::empty) continue;
    if (it->kind == Expr::Kind::bytes) {
      pending += it->text;
      continue;
    }
    flush();
    if (it->kind == Expr::Kind::seq) {
      for (const ExprPtr& sub : it->items) flat.push_back(sub);
    } else {
      flat.push_back(std::move(it));
    }
  }
  flush();
  if (flat.empty()) return empty();
  if (flat.size() == 1) return flat[0];
  Expr e;
  e.kind = Expr::Kind::seq;
  e.items = std::move(flat);
  return make(std::move(e));
}

ExprPtr alt(std::vector<ExprPtr> items) {
  std::vector<ExprPtr> flat;
  for (ExprPtr& it : items) {
    if (!it) throw GrammarError("grammar: null expression in an alternative");
    if (is_nothing(it)) continue;
    if (it->kind == Expr::Kind::alt) {
      for (const ExprPtr& sub : it->items) flat.push_back(sub);
    } else {
      flat.push_back(std::move(it));
    }
  }
  if (flat.size() == 1) return flat[0];
  Expr e;
  e.kind = Expr::Kind::alt;
  e.items = std::move(flat);
  return make(std::move(e));
}

ExprPtr repeat(ExprPtr item, int32_t min, int32_t max) {
  if (min < 0 || (max >= 0 && max < min))
    throw GrammarError("grammar: repetition {" + std::to_string(min) + "," + std::to_string(max) + "} is empty");
  if (min > kMaxRepeat || max > kMaxRepeat)
    throw GrammarError("grammar: repetition counts above " + std::to_string(kMaxRepeat) + " are not supported");
  if (max == 0 || item->kind == Expr::Kind::empty) return empty();
  if (is_nothing(item)) return min == 0 ? empty() : nothing();
  if (min == 1 && max == 1) return item;
  // (x{a,b}){c,d} with a, c in {0, 1} and b, d in {1, unbounded} is x{a*c, 1 or unbounded}.
  auto simple = [](int32_t lo, int32_t hi) { return (lo == 0 || lo == 1) && (hi == 1 || hi < 0); };
  if (item->kind == Expr::Kind::repeat && !item->extra && simple(item->min, item->max) && simple(min, max))
    return repeat(item->item, item->min * min, item->max < 0 || max < 0 ? -1 : 1);
  Expr e;
  e.kind = Expr::Kind::repeat;
  e.item = std::move(item);
  e.min = min;
  e.max = max;
  return make(std::move(e));
}

ExprPtr separated(ExprPtr item, ExprPtr separator, int32_t min, int32_t max) {
  if (!separator) throw GrammarError("grammar: a separated repetition needs a separator");
  if (separator->kind == Expr::Kind::empty) return repeat(std::move(item), min, max);
  if (min < 0 || (max >= 0 && max < min))
    throw GrammarError("grammar: repetition {" + std::to_string(min) + "," + std::to_string(max) + "} is empty");
  if (min > kMaxRepeat || max > kMaxRepeat)
    throw GrammarError("grammar: repetition counts above " + std::to_string(kMaxRepeat) + " are not supported");
  if (max == 0) return empty();
  if (is_nothing(item)) return min == 0 ? empty() : nothing();
  if (max == 1) return min == 0 ? optional(std::move(item)) : item;
  Expr e;
  e.kind = Expr::Kind::repeat;
  e.item = std::move(item);
  e.extra = std::move(separator);
  e.min = min;
  e.max = max;
  return make(std::move(e));
}

ExprPtr optional(ExprPtr item) { return repeat(std::move(item), 0, 1); }
ExprPtr star(ExprPtr item) { return repeat(std::move(item), 0, -1); }
ExprPtr plus(ExprPtr item) { return repeat(std::move(item), 1, -1); }

ExprPtr rule_ref(int32_t rule) {
  Expr e;
  e.kind = Expr::Kind::rule_ref;
  e.rule = rule;
  return make(std::move(e));
}

ExprPtr text_until(std::string_view terminator, std::vector<std::string> forbidden) {
  auto check = [](std::string_view w) {
    if (w.empty()) throw GrammarError("grammar: text_until needs non-empty strings");
    for (char c : w)
      if (static_cast<unsigned char>(c) >= 0x80 || c == 0) throw GrammarError("grammar: text_until strings must be ASCII");
  };
  check(terminator);
  for (const std::string& w : forbidden) check(w);
  Expr e;
  e.kind = Expr::Kind::text_until;
  e.text = std::string(terminator);
  e.words = std::move(forbidden);
  return make(std::move(e));
}

ExprPtr members(std::vector<ExprPtr> items, std::vector<bool> required, ExprPtr separator, ExprPtr extra) {
  if (items.size() != required.size()) throw GrammarError("grammar: members need one required flag each");
  if (!separator) throw GrammarError("grammar: members need a separator");
  Expr e;
  e.kind = Expr::Kind::members;
  e.items = std::move(items);
  e.required = std::move(required);
  e.item = std::move(separator);
  e.extra = std::move(extra);
  return make(std::move(e));
}

int32_t Grammar::add_rule(std::string name, ExprPtr body) {
  rules_.push_back({std::move(name), std::move(body)});
  return static_cast<int32_t>(rules_.size() - 1);
}

void Grammar::set_body(int32_t rule, ExprPtr body) { rules_.at(static_cast<size_t>(rule)).body = std::move(body); }

int32_t Grammar::find_rule(std::string_view name) const {
  for (size_t i = 0; i < rules_.size(); ++i)
    if (rules_[i].name == name) return static_cast<int32_t>(i);
  return -1;
}

namespace {

// Iterative, and each shared sub-expression once: a grammar's expressions form a DAG whose
// paths can be exponentially many.
void check_expr(const Expr& root, const Grammar& g, const std::string& rule, std::unordered_set<const Expr*>& seen,
                const std::function<void()>& tick) {
  std::vector<const Expr*> stack{&root};
  while (!stack.empty()) {
    const Expr* e = stack.back();
    stack.pop_back();
    if (!seen.insert(e).second) continue;
    if (tick && (seen.size() & 0xFFF) == 0) tick();
    if (e->kind == Expr::Kind::rule_ref && (e->rule < 0 || e->rule >= static_cast<int32_t>(g.rules().size())))
      throw GrammarError("grammar: rule '" + rule + "' refers to an unknown rule");
    for (const ExprPtr& it : e->items) stack.push_back(it.get());
    if (e->item) stack.push_back(e->item.get());
    if (e->extra) stack.push_back(e->extra.get());
  }
}

std::string escape_byte(unsigned char c, bool in_class) {
  switch (c) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\\': return "\\\\";
    case '"': return in_class ? "\"" : "\\\"";
    case ']': return in_class ? "\\]" : "]";
    case '-': return in_class ? "\\-" : "-";
    case '^': return in_class ? "\\^" : "^";
    default: break;
  }
  if (c < 0x20 || c >= 0x7F) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", c);
    return buf;
  }
  return std::string(1, static_cast<char>(c));
}

}  // namespace

void Grammar::check(const std::function<void()>& tick) const {
  if (root_ < 0 || root_ >= static_cast<int32_t>(rules_.size())) throw GrammarError("grammar: no root rule");
  std::unordered_set<const Expr*> seen;
  for (const Rule& r : rules_) {
    if (!r.body) throw GrammarError("grammar: rule '" + r.name + "' has no body");
    check_expr(*r.body, *this, r.name, seen, tick);
  }
}

std::string expr_to_string(const Expr& e, const Grammar* names) {
  auto sub = [&](const ExprPtr& x) {
    const bool group = x->kind == Expr::Kind::seq || x->kind == Expr::Kind::alt || x->kind == Expr::Kind::members;
    return group ? "(" + expr_to_string(*x, names) + ")" : expr_to_string(*x, names);
  };
  switch (e.kind) {
    case Expr::Kind::empty: return "\"\"";
    case Expr::Kind::bytes: {
      std::string s = "\"";
      for (char c : e.text) s += escape_byte(static_cast<unsigned char>(c), false);
      return s + "\"";
    }
    case Expr::Kind::byte_set: {
      std::string s = "[";
      for (const auto& [lo, hi] : byte_ranges(e.set)) {
        s += escape_byte(lo, true);
        if (hi > lo) s += "-" + escape_byte(hi, true);
      }
      return s + "]";
    }
    case Expr::Kind::seq: {
      std::string s;
      for (const ExprPtr& it : e.items) s += (s.empty() ? "" : " ") + sub(it);
      return s;
    }
    case Expr::Kind::alt: {
      if (e.items.empty()) return "[]";
      std::string s;
      for (const ExprPtr& it : e.items) s += (s.empty() ? "" : " | ") + sub(it);
      return s;
    }
    case Expr::Kind::repeat: {
      std::string s = sub(e.item);
      if (e.extra) {
        s += " % " + sub(e.extra) + "{" + std::to_string(e.min) + ",";
        return s + (e.max < 0 ? std::string() : std::to_string(e.max)) + "}";
      }
      if (e.min == 0 && e.max == 1) return s + "?";
      if (e.min == 0 && e.max < 0) return s + "*";
      if (e.min == 1 && e.max < 0) return s + "+";
      s += "{" + std::to_string(e.min);
      if (e.max != e.min) s += "," + (e.max < 0 ? std::string() : std::to_string(e.max));
      return s + "}";
    }
    case Expr::Kind::rule_ref:
      return names && e.rule >= 0 && e.rule < static_cast<int32_t>(names->rules().size())
                 ? names->rule(e.rule).name
                 : "rule" + std::to_string(e.rule);
    case Expr::Kind::text_until: {
      std::string s = "until(" + expr_to_string(*bytes(e.text), names);
      for (const std::string& w : e.words) s += ", not " + expr_to_string(*bytes(w), names);
      return s + ")";
    }
    case Expr::Kind::members: {
      std::string s = "members(";
      for (size_t i = 0; i < e.items.size(); ++i)
        s += (i ? ", " : "") + sub(e.items[i]) + (e.required[i] ? "" : "?");
      if (e.extra) s += ", extra " + sub(e.extra);
      return s + "; sep " + sub(e.item) + ")";
    }
  }
  return "?";
}

std::string Grammar::to_string() const {
  std::string s;
  for (const Rule& r : rules_) s += r.name + " ::= " + (r.body ? expr_to_string(*r.body, this) : "?") + "\n";
  return s;
}

}  // namespace ds::grammar
