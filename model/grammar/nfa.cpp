// Thompson's construction with rule inlining (nfa.h).
//
// emit(e, in) adds the states of `e` entered from `in` and returns its exit state. It only
// ever adds edges leaving `in` and never edges back into it: loops return to fresh states of
// their own, so a fragment can follow any other (concatenation just continues from the
// previous exit) without letting one fragment's loop re-enter another.
#include "model/grammar/nfa.h"

#include <algorithm>
#include <iterator>
#include <string>

namespace ds::grammar::detail {
namespace {

class Builder {
 public:
  Builder(const Grammar& g, const std::vector<int32_t>& pda_rule_of, CompileBudget& budget, Nfa& nfa)
      : g_(g), pda_rule_of_(pda_rule_of), budget_(budget), nfa_(nfa) {}

  [[gnu::noinline]] int32_t add() {
    const int64_t n = static_cast<int64_t>(nfa_.states.size());
    if (n >= budget_.limits().max_states)
      CompileBudget::too_large(CompileStage::expand, "automaton states", budget_.limits().max_states);
    if ((n & (kChargeEvery - 1)) == 0) budget_.charge(kChargeEvery * kNfaStateBytes, CompileStage::expand);
    nfa_.states.emplace_back();
    nfa_.rule_of.push_back(current_rule_);
    return static_cast<int32_t>(nfa_.states.size() - 1);
  }
  [[gnu::noinline]] void eps(int32_t from, int32_t to) { nfa_.states[static_cast<size_t>(from)].eps.push_back(to); }
  [[gnu::noinline]] void edge(int32_t from, uint8_t lo, uint8_t hi, int32_t to) {
    nfa_.states[static_cast<size_t>(from)].edges.push_back({lo, hi, to});
  }
  [[gnu::noinline]] int32_t fresh_from(int32_t in) {
    const int32_t s = add();
    eps(in, s);
    return s;
  }

  void build_rule(int32_t pda_rule, int32_t grammar_rule) {
    current_rule_ = pda_rule;
    const int32_t start = add();
    const int32_t exit = emit(*g_.rule(grammar_rule).body, start, 0);
    nfa_.start[static_cast<size_t>(pda_rule)] = start;
    nfa_.accept[static_cast<size_t>(pda_rule)] = exit;
  }

 private:
  // Depth-bounded recursion: an expression's own nesting is bounded by its builders
  // (kMaxExprDepth), and each inlined rule adds one level. Its frame is kept small --
  // everything that is not the recursion itself is in helpers that are never inlined into it --
  // so kMaxEmitDepth frames fit in a thread's stack, under the sanitizers too.
  static constexpr int kMaxEmitDepth = 2048;
  int32_t emit(const Expr& e, int32_t in, int depth) {
    if (depth > kMaxEmitDepth) too_deep();
    switch (e.kind) {
      case Expr::Kind::empty: return in;
      case Expr::Kind::bytes: return emit_bytes(e.text, in);
      case Expr::Kind::byte_set: return emit_byte_set(e.set, in);
      case Expr::Kind::seq: {
        int32_t cur = in;
        for (const ExprPtr& it : e.items) cur = emit(*it, cur, depth + 1);
        return cur;
      }
      case Expr::Kind::alt: {
        const int32_t o = add();
        for (const ExprPtr& it : e.items) eps(emit(*it, fresh_from(in), depth + 1), o);
        return o;
      }
      case Expr::Kind::repeat: {
        if (e.extra) return emit_separated(e, in, depth);
        int32_t cur = in;
        for (int32_t k = 0; k < e.min; ++k) cur = emit(*e.item, fresh_from(cur), depth + 1);
        if (e.max < 0) {
          const int32_t loop = fresh_from(cur);
          eps(emit(*e.item, fresh_from(loop), depth + 1), loop);
          return loop;
        }
        const int32_t o = add();
        for (int32_t k = e.min; k < e.max; ++k) {
          eps(cur, o);
          cur = emit(*e.item, fresh_from(cur), depth + 1);
        }
        eps(cur, o);
        return o;
      }
      case Expr::Kind::rule_ref: {
        const int32_t target = pda_rule_of_[static_cast<size_t>(e.rule)];
        if (target < 0) return emit(*g_.rule(e.rule).body, in, depth + 1);
        return emit_call(target, in);
      }
      case Expr::Kind::text_until: return emit_text_until(e.text, e.words, in);
      case Expr::Kind::members: return emit_members(e, in, depth);
    }
    return in;
  }

  [[noreturn, gnu::noinline]] static void too_deep() {
    throw GrammarError("grammar: expressions nested too deeply (more than " + std::to_string(kMaxEmitDepth) +
                       " levels, counting rules used inside rules)");
  }
  [[gnu::noinline]] int32_t emit_bytes(const std::string& text, int32_t in) {
    int32_t cur = in;
    for (char ch : text) {
      const int32_t o = add();
      const auto b = static_cast<uint8_t>(ch);
      edge(cur, b, b, o);
      cur = o;
    }
    return cur;
  }
  [[gnu::noinline]] int32_t emit_byte_set(const ByteSet& set, int32_t in) {
    const int32_t o = add();
    for (const auto& [lo, hi] : byte_ranges(set)) edge(in, lo, hi, o);
    return o;
  }
  [[gnu::noinline]] int32_t emit_call(int32_t rule, int32_t in) {
    const int32_t o = add();
    nfa_.states[static_cast<size_t>(in)].calls.push_back({rule, o});
    return o;
  }

  // Aho-Corasick over ASCII for the terminator and the forbidden strings: a state per prefix
  // of any of them; reaching the whole terminator exits, reaching a forbidden string (or a
  // state whose suffix is one) has no edge. Multi-byte UTF-8 characters, which cannot be part
  // of an ASCII string, go back to the start after their continuation bytes.
  [[gnu::noinline]] int32_t emit_text_until(const std::string& term, const std::vector<std::string>& forbidden, int32_t in) {
    struct Node {
      int32_t kids[128];
      int32_t fail = 0;
      int kind = 0;  // 0 plain, 1 terminator, 2 forbidden
    };
    std::vector<Node> trie(1);
    std::fill(std::begin(trie[0].kids), std::end(trie[0].kids), -1);
    auto insert = [&](const std::string& w, int kind) {
      int32_t u = 0;
      for (char ch : w) {
        const auto c = static_cast<size_t>(ch);
        if (trie[static_cast<size_t>(u)].kids[c] < 0) {
          trie[static_cast<size_t>(u)].kids[c] = static_cast<int32_t>(trie.size());
          trie.emplace_back();
          std::fill(std::begin(trie.back().kids), std::end(trie.back().kids), -1);
        }
        u = trie[static_cast<size_t>(u)].kids[c];
      }
      trie[static_cast<size_t>(u)].kind = std::max(trie[static_cast<size_t>(u)].kind, kind);
    };
    insert(term, 1);
    for (const std::string& w : forbidden) insert(w, 2);
    // Breadth-first: failure links, then goto completed into a full transition function.
    std::vector<int32_t> order{0};
    for (size_t i = 0; i < order.size(); ++i) {
      const int32_t u = order[i];
      for (size_t c = 0; c < 128; ++c) {
        const int32_t v = trie[static_cast<size_t>(u)].kids[c];
        if (v < 0) {
          trie[static_cast<size_t>(u)].kids[c] = u == 0 ? 0 : trie[static_cast<size_t>(trie[static_cast<size_t>(u)].fail)].kids[c];
          continue;
        }
        Node& nv = trie[static_cast<size_t>(v)];
        nv.fail = u == 0 ? 0 : trie[static_cast<size_t>(trie[static_cast<size_t>(u)].fail)].kids[c];
        // A node's own string decides (so a terminator that ends with a forbidden string
        // still exits); otherwise the longest suffix that is a whole string.
        if (nv.kind == 0) nv.kind = trie[static_cast<size_t>(nv.fail)].kind;
        order.push_back(v);
      }
    }
    std::vector<int32_t> state(trie.size(), -1);
    for (size_t u = 0; u < trie.size(); ++u)
      if (trie[u].kind == 0) state[u] = add();
    eps(in, state[0]);
    const int32_t out = add();
    // Continuation bytes: after a lead byte, the bytes its character still needs, then back to
    // the start. Index 0 is the start; 1..3 need that many continuation bytes; 4..7 need the
    // restricted second byte of E0, ED, F0 and F4 (no overlong forms, surrogates or values
    // past U+10FFFF).
    struct Step {
      int from;
      uint8_t lo, hi;
      int to;
    };
    static constexpr Step kTails[] = {{1, 0x80, 0xBF, 0}, {2, 0x80, 0xBF, 1}, {3, 0x80, 0xBF, 2}, {4, 0xA0, 0xBF, 1},
                                      {5, 0x80, 0x9F, 1}, {6, 0x90, 0xBF, 2}, {7, 0x80, 0x8F, 2}};
    static constexpr Step kLeads[] = {{0, 0xC2, 0xDF, 1}, {0, 0xE0, 0xE0, 4}, {0, 0xE1, 0xEC, 2}, {0, 0xED, 0xED, 5},
                                      {0, 0xEE, 0xEF, 2}, {0, 0xF0, 0xF0, 6}, {0, 0xF1, 0xF3, 3}, {0, 0xF4, 0xF4, 7}};
    int32_t utf8[8];
    utf8[0] = state[0];
    for (int i = 1; i < 8; ++i) utf8[i] = add();
    for (const Step& t : kTails) edge(utf8[t.from], t.lo, t.hi, utf8[t.to]);
    for (size_t u = 0; u < trie.size(); ++u) {
      if (trie[u].kind != 0) continue;
      const int32_t from = state[u];
      auto target = [&](int c) {
        const Node& v = trie[static_cast<size_t>(trie[u].kids[static_cast<size_t>(c)])];
        const auto vi = static_cast<size_t>(trie[u].kids[static_cast<size_t>(c)]);
        return v.kind == 1 ? out : v.kind == 2 ? -1 : state[vi];
      };
      for (int b = 1; b < 0x80;) {  // NUL is not text
        const int32_t to = target(b);
        int hi = b;
        while (hi + 1 < 0x80 && target(hi + 1) == to) ++hi;
        if (to >= 0) edge(from, static_cast<uint8_t>(b), static_cast<uint8_t>(hi), to);
        b = hi + 1;
      }
      for (const Step& t : kLeads) edge(from, t.lo, t.hi, utf8[t.to]);
    }
    return out;
  }

  // item (separator item)..., min..max items. The unbounded part is one copy of the item in a
  // loop: its entry E is fresh and entered only from before the item and from the separator,
  // so nothing inside the item can re-enter it (emit's rule above).
  [[gnu::noinline]] int32_t emit_separated(const Expr& e, int32_t in, int depth) {
    const Expr& item = *e.item;
    const Expr& sep = *e.extra;
    if (e.max >= 0) {
      int32_t cur = emit(item, fresh_from(in), depth + 1);
      const int32_t o = add();
      if (e.min == 0) eps(in, o);
      for (int32_t k = 2; k <= e.max; ++k) {
        if (k - 1 >= e.min) eps(cur, o);
        cur = emit(item, fresh_from(emit(sep, fresh_from(cur), depth + 1)), depth + 1);
      }
      eps(cur, o);
      return o;
    }
    int32_t cur = in;
    for (int32_t k = 1; k < e.min; ++k)
      cur = emit(sep, fresh_from(emit(item, fresh_from(cur), depth + 1)), depth + 1);
    const int32_t entry = fresh_from(cur);
    const int32_t last = emit(item, entry, depth + 1);
    eps(emit(sep, fresh_from(last), depth + 1), entry);
    if (e.min > 0) return last;
    const int32_t o = add();
    eps(in, o);
    eps(last, o);
    return o;
  }

  // P[i]: before member i, none written yet; Q[i]: before member i, some written (so the
  // next one needs the separator). Member i is emitted once, from a fresh entry that P[i] and
  // the separator after Q[i] both lead to, so objects nested in objects stay linear in size.
  [[gnu::noinline]] int32_t emit_members(const Expr& e, int32_t in, int depth) {
    const size_t n = e.items.size();
    std::vector<int32_t> p(n + 1), q(n + 1);
    p[0] = in;
    for (size_t i = 1; i <= n; ++i) p[i] = add();
    for (size_t i = 0; i <= n; ++i) q[i] = add();
    for (size_t i = 0; i < n; ++i) {
      const int32_t entry = fresh_from(p[i]);
      eps(emit(*e.item, fresh_from(q[i]), depth + 1), entry);
      eps(emit(*e.items[i], entry, depth + 1), q[i + 1]);
      if (!e.required[i]) {
        eps(p[i], p[i + 1]);
        eps(q[i], q[i + 1]);
      }
    }
    const int32_t out = add();
    eps(p[n], out);
    if (!e.extra) {
      eps(q[n], out);
      return out;
    }
    const int32_t loop = fresh_from(q[n]);
    const int32_t entry = fresh_from(p[n]);
    eps(emit(*e.item, fresh_from(loop), depth + 1), entry);
    eps(emit(*e.extra, entry, depth + 1), loop);
    eps(loop, out);
    return out;
  }

  static constexpr int64_t kChargeEvery = 1024;

  const Grammar& g_;
  const std::vector<int32_t>& pda_rule_of_;
  CompileBudget& budget_;
  Nfa& nfa_;
  int32_t current_rule_ = 0;
};

}  // namespace

Nfa build_nfa(const Grammar& g, const std::vector<int32_t>& pda_rule_of, CompileBudget& budget) {
  Nfa nfa;
  int32_t count = 0;
  for (int32_t x : pda_rule_of) count = std::max(count, x + 1);
  nfa.start.assign(static_cast<size_t>(count), -1);
  nfa.accept.assign(static_cast<size_t>(count), -1);
  nfa.grammar_rule.assign(static_cast<size_t>(count), -1);
  Builder b(g, pda_rule_of, budget, nfa);
  for (size_t r = 0; r < pda_rule_of.size(); ++r) {
    const int32_t pr = pda_rule_of[r];
    if (pr < 0) continue;
    nfa.grammar_rule[static_cast<size_t>(pr)] = static_cast<int32_t>(r);
    b.build_rule(pr, static_cast<int32_t>(r));
  }
  return nfa;
}

}  // namespace ds::grammar::detail
