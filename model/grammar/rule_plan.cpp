// plan_rules (rule_plan.h): recursive rules, the inlining decisions and the size estimate.
//
// The grammar is seen as one DAG whose nodes are its distinct expressions and its inlinable
// rules; an edge says how many copies emit() (nfa.cpp) makes of a child per copy of its parent
// (a repetition {n,m} makes m). Walked iteratively, each node once: expressions are shared
// (one JSON whitespace expression serves a whole schema), so paths can be exponentially many.
#include "model/grammar/rule_plan.h"

#include <algorithm>
#include <unordered_map>

namespace ds::grammar::detail {
namespace {

constexpr int64_t kSaturated = int64_t{1} << 50;

int64_t sat_add(int64_t a, int64_t b) { return std::min(kSaturated, a + b); }
int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > kSaturated / b) return kSaturated;
  return std::min(kSaturated, a * b);
}

// The rule ids an expression refers to (each shared sub-expression visited once).
std::vector<int32_t> refs_of(const Expr& body, const CompileBudget& budget) {
  std::vector<int32_t> out;
  std::vector<const Expr*> stack{&body};
  std::unordered_map<const Expr*, bool> seen;
  while (!stack.empty()) {
    const Expr* e = stack.back();
    stack.pop_back();
    if (!seen.emplace(e, true).second) continue;
    if ((seen.size() & 0xFFF) == 0) budget.check(CompileStage::expand);
    if (e->kind == Expr::Kind::rule_ref) out.push_back(e->rule);
    for (const ExprPtr& it : e->items) stack.push_back(it.get());
    if (e->item) stack.push_back(e->item.get());
    if (e->extra) stack.push_back(e->extra.get());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Rules on a reference cycle (Tarjan's strongly connected components, iteratively).
std::vector<bool> recursive_rules(const std::vector<std::vector<int32_t>>& refs) {
  const size_t n = refs.size();
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
  std::vector<bool> out(n, false);
  for (size_t r = 0; r < n; ++r)
    out[r] = comp_size[static_cast<size_t>(comp[r])] > 1 ||
             std::binary_search(refs[r].begin(), refs[r].end(), static_cast<int32_t>(r));
  return out;
}

class Planner {
 public:
  Planner(const Grammar& g, const CompileBudget& budget) : g_(g), budget_(budget) {}

  RulePlan run() {
    const size_t n = g_.rules().size();
    std::vector<std::vector<int32_t>> refs(n);
    for (size_t r = 0; r < n; ++r) refs[r] = refs_of(*g_.rule(static_cast<int32_t>(r)).body, budget_);
    keep_ = recursive_rules(refs);
    keep_[static_cast<size_t>(g_.root())] = true;
    structural_ = keep_;
    rule_node_.assign(n, -1);
    build_graph();
    const std::vector<int64_t> full = sizes();
    decide(full);
    const std::vector<int64_t> final_sizes = sizes();
    RulePlan plan;
    for (size_t r = 0; r < n; ++r)
      if (keep_[r]) plan.states = sat_add(plan.states, final_sizes[static_cast<size_t>(body_node(r))] + 1);
    if (plan.states > budget_.limits().max_states)
      CompileBudget::too_large(CompileStage::expand, "automaton states", budget_.limits().max_states);
    plan.pda_rule_of.assign(n, -1);
    int32_t next = 0;
    plan.pda_rule_of[static_cast<size_t>(g_.root())] = next++;
    for (size_t r = 0; r < n; ++r)
      if (keep_[r] && static_cast<int32_t>(r) != g_.root()) plan.pda_rule_of[r] = next++;
    return plan;
  }

 private:
  struct Node {
    const Expr* expr = nullptr;  // null: a rule node
    int32_t rule = -1;
    std::vector<std::pair<int32_t, int64_t>> kids;  // (node, copies per copy of this node)
  };

  int32_t expr_node(const Expr* e) {
    auto [it, inserted] = expr_ids_.emplace(e, static_cast<int32_t>(nodes_.size()));
    if (inserted) {
      nodes_.push_back({e, -1, {}});
      pending_.push_back(it->second);
    }
    return it->second;
  }
  int32_t rule_node(int32_t r) {
    int32_t& id = rule_node_[static_cast<size_t>(r)];
    if (id < 0) {
      id = static_cast<int32_t>(nodes_.size());
      nodes_.push_back({nullptr, r, {}});
      pending_.push_back(id);
    }
    return id;
  }
  int32_t body_node(size_t r) { return expr_node(g_.rule(static_cast<int32_t>(r)).body.get()); }

  void build_graph() {
    for (size_t r = 0; r < keep_.size(); ++r)
      if (structural_[r]) sources_.push_back(body_node(r));
    uint64_t visits = 0;
    while (!pending_.empty()) {
      const int32_t id = pending_.back();
      pending_.pop_back();
      if ((++visits & 0xFFF) == 0) budget_.check(CompileStage::expand);
      std::vector<std::pair<int32_t, int64_t>> kids;
      const Expr* e = nodes_[static_cast<size_t>(id)].expr;
      if (!e) {
        kids.push_back({body_node(static_cast<size_t>(nodes_[static_cast<size_t>(id)].rule)), 1});
      } else {
        switch (e->kind) {
          case Expr::Kind::seq:
          case Expr::Kind::alt:
            for (const ExprPtr& it : e->items) kids.push_back({expr_node(it.get()), 1});
            break;
          case Expr::Kind::repeat: {
            const int64_t lo = e->min, hi = e->max;
            if (!e->extra) {
              kids.push_back({expr_node(e->item.get()), hi >= 0 ? hi : lo + 1});
            } else {
              const int64_t copies = hi >= 0 ? hi : std::max<int64_t>(lo, 1);
              kids.push_back({expr_node(e->item.get()), copies});
              kids.push_back({expr_node(e->extra.get()), hi >= 0 ? hi - 1 : copies});
            }
            break;
          }
          case Expr::Kind::members:
            for (const ExprPtr& it : e->items) kids.push_back({expr_node(it.get()), 1});
            kids.push_back({expr_node(e->item.get()), static_cast<int64_t>(e->items.size()) + (e->extra ? 1 : 0)});
            if (e->extra) kids.push_back({expr_node(e->extra.get()), 1});
            break;
          case Expr::Kind::rule_ref:
            if (!structural_[static_cast<size_t>(e->rule)]) kids.push_back({rule_node(e->rule), 1});
            break;
          default: break;
        }
      }
      nodes_[static_cast<size_t>(id)].kids = std::move(kids);
    }
    // Post-order (children first), iteratively.
    std::vector<uint8_t> state(nodes_.size(), 0);
    std::vector<std::pair<int32_t, size_t>> work;
    for (int32_t s : sources_) {
      if (state[static_cast<size_t>(s)]) continue;
      work.push_back({s, 0});
      state[static_cast<size_t>(s)] = 1;
      while (!work.empty()) {
        auto& [v, k] = work.back();
        const auto& kids = nodes_[static_cast<size_t>(v)].kids;
        if (k < kids.size()) {
          const int32_t c = kids[k++].first;
          if (!state[static_cast<size_t>(c)]) {
            state[static_cast<size_t>(c)] = 1;
            work.push_back({c, 0});
          }
          continue;
        }
        order_.push_back(v);
        work.pop_back();
      }
    }
  }

  // The states one copy of each node emits, given keep_ (a kept rule is one call state).
  std::vector<int64_t> sizes() const {
    std::vector<int64_t> size(nodes_.size(), 0);
    auto of = [&](const ExprPtr& x) { return size[static_cast<size_t>(expr_ids_.at(x.get()))]; };
    uint64_t visits = 0;
    for (int32_t id : order_) {
      if ((++visits & 0xFFF) == 0) budget_.check(CompileStage::expand);
      const Node& node = nodes_[static_cast<size_t>(id)];
      int64_t s = 0;
      if (!node.expr) {
        s = size[static_cast<size_t>(node.kids[0].first)];
      } else {
        const Expr& e = *node.expr;
        switch (e.kind) {
          case Expr::Kind::empty: break;
          case Expr::Kind::bytes: s = static_cast<int64_t>(e.text.size()); break;
          case Expr::Kind::byte_set: s = 1; break;
          case Expr::Kind::seq:
            for (const ExprPtr& it : e.items) s = sat_add(s, of(it));
            break;
          case Expr::Kind::alt:
            s = 1;
            for (const ExprPtr& it : e.items) s = sat_add(s, of(it) + 1);
            break;
          case Expr::Kind::repeat: {
            const int64_t lo = e.min, hi = e.max;
            if (!e.extra) {
              s = hi >= 0 ? sat_add(sat_mul(hi, of(e.item) + 1), 1) : sat_add(sat_mul(lo + 1, of(e.item) + 1), 2);
            } else {
              const int64_t one = sat_add(of(e.item), of(e.extra) + 3);
              s = hi >= 0 ? sat_add(sat_mul(hi, one), 2) : sat_add(sat_mul(std::max<int64_t>(lo, 1), one), 3);
            }
            break;
          }
          case Expr::Kind::rule_ref:
            s = keep_[static_cast<size_t>(e.rule)] ? 1 : size[static_cast<size_t>(rule_node_[static_cast<size_t>(e.rule)])];
            break;
          case Expr::Kind::text_until:
            s = 10 + static_cast<int64_t>(e.text.size());
            for (const std::string& w : e.words) s += static_cast<int64_t>(w.size());
            break;
          case Expr::Kind::members: {
            const int64_t n = static_cast<int64_t>(e.items.size());
            s = sat_add(2, sat_mul(n, of(e.item) + 4));
            for (const ExprPtr& it : e.items) s = sat_add(s, of(it) + 2);
            if (e.extra) s = sat_add(s, sat_add(of(e.item), of(e.extra) + 4));
            break;
          }
        }
      }
      size[static_cast<size_t>(id)] = s;
    }
    return size;
  }

  // Top-down (parents before children): how many copies of each node the kept rules emit;
  // an inlinable rule whose copies would cost more than kInlineBudget is kept.
  void decide(const std::vector<int64_t>& full) {
    std::vector<int64_t> copies(nodes_.size(), 0);
    for (int32_t s : sources_) copies[static_cast<size_t>(s)] = sat_add(copies[static_cast<size_t>(s)], 1);
    uint64_t visits = 0;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      if ((++visits & 0xFFF) == 0) budget_.check(CompileStage::expand);
      const Node& node = nodes_[static_cast<size_t>(*it)];
      int64_t c = copies[static_cast<size_t>(*it)];
      if (!node.expr && c >= 2 && sat_mul(c, full[static_cast<size_t>(*it)]) > kInlineBudget) {
        keep_[static_cast<size_t>(node.rule)] = true;
        c = 1;  // its body is emitted once, as a rule
      }
      for (const auto& [kid, n] : node.kids)
        copies[static_cast<size_t>(kid)] = sat_add(copies[static_cast<size_t>(kid)], sat_mul(c, n));
    }
  }

  const Grammar& g_;
  const CompileBudget& budget_;
  std::vector<bool> keep_, structural_;
  std::vector<Node> nodes_;
  std::unordered_map<const Expr*, int32_t> expr_ids_;
  std::vector<int32_t> rule_node_;
  std::vector<int32_t> pending_, sources_, order_;
};

}  // namespace

RulePlan plan_rules(const Grammar& grammar, const CompileBudget& budget) { return Planner(grammar, budget).run(); }

}  // namespace ds::grammar::detail
