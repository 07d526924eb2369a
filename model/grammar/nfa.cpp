// Thompson's construction with rule inlining (nfa.h).
//
// emit(e, in) adds the states of `e` entered from `in` and returns its exit state. It only
// ever adds edges leaving `in` and never edges back into it: loops return to fresh states of
// their own, so a fragment can follow any other (concatenation just continues from the
// previous exit) without letting one fragment's loop re-enter another.
#include "model/grammar/nfa.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <string>

namespace ds::grammar::detail {
namespace {

void collect_refs(const Expr& e, std::vector<int32_t>& out) {
  if (e.kind == Expr::Kind::rule_ref) out.push_back(e.rule);
  for (const ExprPtr& it : e.items) collect_refs(*it, out);
  if (e.item) collect_refs(*e.item, out);
  if (e.extra) collect_refs(*e.extra, out);
}

class Builder {
 public:
  Builder(const Grammar& g, const std::vector<int32_t>& pda_rule_of, int64_t max_states, Nfa& nfa)
      : g_(g), pda_rule_of_(pda_rule_of), max_states_(max_states), nfa_(nfa) {}

  int32_t add() {
    if (static_cast<int64_t>(nfa_.states.size()) >= max_states_)
      throw GrammarError("grammar: too large (over " + std::to_string(max_states_) +
                         " automaton states; reduce repetition counts or the number of alternatives)");
    nfa_.states.emplace_back();
    nfa_.rule_of.push_back(current_rule_);
    return static_cast<int32_t>(nfa_.states.size() - 1);
  }
  void eps(int32_t from, int32_t to) { nfa_.states[static_cast<size_t>(from)].eps.push_back(to); }
  void edge(int32_t from, uint8_t lo, uint8_t hi, int32_t to) {
    nfa_.states[static_cast<size_t>(from)].edges.push_back({lo, hi, to});
  }
  int32_t fresh_from(int32_t in) {
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
  int32_t emit(const Expr& e, int32_t in, int depth) {
    if (depth > 4096) throw GrammarError("grammar: expressions nested too deeply");
    switch (e.kind) {
      case Expr::Kind::empty: return in;
      case Expr::Kind::bytes: {
        int32_t cur = in;
        for (char ch : e.text) {
          const int32_t o = add();
          const auto b = static_cast<uint8_t>(ch);
          edge(cur, b, b, o);
          cur = o;
        }
        return cur;
      }
      case Expr::Kind::byte_set: {
        const int32_t o = add();
        for (const auto& [lo, hi] : byte_ranges(e.set)) edge(in, lo, hi, o);
        return o;
      }
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
        const int32_t o = add();
        nfa_.states[static_cast<size_t>(in)].calls.push_back({target, o});
        return o;
      }
      case Expr::Kind::text_until: return emit_text_until(e.text, e.words, in);
      case Expr::Kind::members: return emit_members(e, in, depth);
    }
    return in;
  }

  // Aho-Corasick over ASCII for the terminator and the forbidden strings: a state per prefix
  // of any of them; reaching the whole terminator exits, reaching a forbidden string (or a
  // state whose suffix is one) has no edge. Multi-byte UTF-8 characters, which cannot be part
  // of an ASCII string, go back to the start after their continuation bytes.
  int32_t emit_text_until(const std::string& term, const std::vector<std::string>& forbidden, int32_t in) {
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

  // P[i]: before member i, none written yet; Q[i]: before member i, some written (so the
  // next one needs the separator). Each member is emitted twice, once from each.
  int32_t emit_members(const Expr& e, int32_t in, int depth) {
    const size_t n = e.items.size();
    std::vector<int32_t> p(n + 1), q(n + 1);
    p[0] = in;
    for (size_t i = 1; i <= n; ++i) p[i] = add();
    for (size_t i = 0; i <= n; ++i) q[i] = add();
    for (size_t i = 0; i < n; ++i) {
      eps(emit(*e.items[i], fresh_from(p[i]), depth + 1), q[i + 1]);
      const int32_t sep = emit(*e.item, fresh_from(q[i]), depth + 1);
      eps(emit(*e.items[i], fresh_from(sep), depth + 1), q[i + 1]);
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
    const int32_t sep = emit(*e.item, fresh_from(loop), depth + 1);
    eps(emit(*e.extra, fresh_from(sep), depth + 1), loop);
    eps(emit(*e.extra, fresh_from(p[n]), depth + 1), loop);
    eps(loop, out);
    return out;
  }

  const Grammar& g_;
  const std::vector<int32_t>& pda_rule_of_;
  int64_t max_states_;
  Nfa& nfa_;
  int32_t current_rule_ = 0;
};

}  // namespace

std::vector<int32_t> pda_rule_numbers(const Grammar& g) {
  const size_t n = g.rules().size();
  std::vector<std::vector<int32_t>> refs(n);
  for (size_t r = 0; r < n; ++r) {
    collect_refs(*g.rule(static_cast<int32_t>(r)).body, refs[r]);
    std::sort(refs[r].begin(), refs[r].end());
    refs[r].erase(std::unique(refs[r].begin(), refs[r].end()), refs[r].end());
  }
  // Tarjan's strongly connected components, iteratively (grammars from schemas can be deep).
  std::vector<int32_t> index(n, -1), low(n, 0), comp(n, -1), comp_size;
  std::vector<bool> on_stack(n, false);
  std::vector<int32_t> stack;
  int32_t counter = 0;
  for (size_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    std::vector<std::pair<int32_t, size_t>> work{{static_cast<int32_t>(root), 0}};
    while (!work.empty()) {
      auto& [v, next_child] = work.back();
      const size_t vi = static_cast<size_t>(v);
      if (next_child == 0 && index[vi] < 0) {
        index[vi] = low[vi] = counter++;
        stack.push_back(v);
        on_stack[vi] = true;
      }
      if (next_child < refs[vi].size()) {
        const int32_t w = refs[vi][next_child++];
        const size_t wi = static_cast<size_t>(w);
        if (index[wi] < 0) {
          work.push_back({w, 0});
        } else if (on_stack[wi]) {
          low[vi] = std::min(low[vi], index[wi]);
        }
        continue;
      }
      if (low[vi] == index[vi]) {
        const int32_t c = static_cast<int32_t>(comp_size.size());
        int32_t size = 0;
        for (;;) {
          const int32_t w = stack.back();
          stack.pop_back();
          on_stack[static_cast<size_t>(w)] = false;
          comp[static_cast<size_t>(w)] = c;
          ++size;
          if (w == v) break;
        }
        comp_size.push_back(size);
      }
      const int32_t done = v;
      work.pop_back();
      if (!work.empty()) {
        const size_t parent = static_cast<size_t>(work.back().first);
        low[parent] = std::min(low[parent], low[static_cast<size_t>(done)]);
      }
    }
  }
  std::vector<int32_t> out(n, -1);
  int32_t next = 0;
  out[static_cast<size_t>(g.root())] = next++;
  for (size_t r = 0; r < n; ++r) {
    if (static_cast<int32_t>(r) == g.root()) continue;
    const bool self = std::binary_search(refs[r].begin(), refs[r].end(), static_cast<int32_t>(r));
    if (self || comp_size[static_cast<size_t>(comp[r])] > 1) out[r] = next++;
  }
  return out;
}

Nfa build_nfa(const Grammar& g, const std::vector<int32_t>& pda_rule_of, int64_t max_states) {
  Nfa nfa;
  int32_t count = 0;
  for (int32_t x : pda_rule_of) count = std::max(count, x + 1);
  nfa.start.assign(static_cast<size_t>(count), -1);
  nfa.accept.assign(static_cast<size_t>(count), -1);
  nfa.grammar_rule.assign(static_cast<size_t>(count), -1);
  Builder b(g, pda_rule_of, max_states, nfa);
  for (size_t r = 0; r < pda_rule_of.size(); ++r) {
    const int32_t pr = pda_rule_of[r];
    if (pr < 0) continue;
    nfa.grammar_rule[static_cast<size_t>(pr)] = static_cast<int32_t>(r);
    b.build_rule(pr, static_cast<int32_t>(r));
  }
  return nfa;
}

}  // namespace ds::grammar::detail
