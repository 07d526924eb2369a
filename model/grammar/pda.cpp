// Subset construction, trimming and checks (pda.h).
#include "model/grammar/pda.h"

#include <algorithm>
#include <unordered_map>

#include "model/grammar/nfa.h"
#include "model/grammar/rule_plan.h"

namespace ds::grammar {
namespace {

struct VecHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

class Determinizer {
 public:
  Determinizer(const detail::Nfa& nfa, CompileBudget& budget) : nfa_(nfa), budget_(budget) {
    const size_t n = nfa.states.size();
    stamp_.assign(n, 0);
    is_accept_.assign(n, false);
    for (int32_t a : nfa.accept)
      if (a >= 0) is_accept_[static_cast<size_t>(a)] = true;
    important_.assign(n, false);
    for (size_t s = 0; s < n; ++s) {
      const auto& st = nfa.states[s];
      important_[s] = !st.edges.empty() || !st.calls.empty() || is_accept_[s];
    }
    build_classes();
  }

  Pda run() {
    const size_t rules = nfa_.start.size();
    pda_.rule_start.assign(rules, -1);
    for (size_t r = 0; r < rules; ++r) pda_.rule_start[r] = intern(closure({nfa_.start[r]}), static_cast<int32_t>(r));
    while (!work_.empty()) {
      const int32_t d = work_.back();
      work_.pop_back();
      budget_.check(CompileStage::determinise);
      expand(d);
    }
    return std::move(pda_);
  }

 private:
  void build_classes() {
    std::vector<bool> boundary(257, false);
    boundary[0] = boundary[256] = true;
    for (const auto& st : nfa_.states)
      for (const auto& e : st.edges) {
        boundary[e.lo] = true;
        boundary[static_cast<size_t>(e.hi) + 1] = true;
      }
    int32_t cls = -1;
    for (int b = 0; b < 256; ++b) {
      if (boundary[static_cast<size_t>(b)]) ++cls;
      pda_.byte_class[static_cast<size_t>(b)] = static_cast<uint8_t>(cls);
    }
    pda_.num_classes = cls + 1;
  }

  // The important states reachable from `seeds` by epsilon edges, sorted.
  std::vector<int32_t> closure(std::vector<int32_t> seeds) {
    ++epoch_;
    std::vector<int32_t> out;
    std::vector<int32_t>& stack = seeds;
    for (int32_t s : stack) stamp_[static_cast<size_t>(s)] = epoch_;
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      if (important_[static_cast<size_t>(s)]) out.push_back(s);
      for (int32_t t : nfa_.states[static_cast<size_t>(s)].eps) {
        if (stamp_[static_cast<size_t>(t)] == epoch_) continue;
        stamp_[static_cast<size_t>(t)] = epoch_;
        stack.push_back(t);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  int32_t intern(std::vector<int32_t> subset, int32_t rule) {
    if (subset.empty()) return -1;
    auto it = ids_.find(subset);
    if (it != ids_.end()) return it->second;
    if (static_cast<int64_t>(pda_.states.size()) >= budget_.limits().max_states)
      CompileBudget::too_large(CompileStage::determinise, "automaton states", budget_.limits().max_states);
    // The subset is held twice (by id and in the index), plus the state's transition row.
    budget_.charge(static_cast<int64_t>(subset.size() * 2 * sizeof(int32_t) + 96 + sizeof(PdaState)) +
                       int64_t{pda_.num_classes} * 4,
                   CompileStage::determinise);
    const int32_t id = static_cast<int32_t>(pda_.states.size());
    PdaState st;
    st.rule = rule;
    for (int32_t s : subset) st.final = st.final || is_accept_[static_cast<size_t>(s)];
    pda_.states.push_back(st);
    pda_.next.resize(pda_.next.size() + static_cast<size_t>(pda_.num_classes), -1);
    subsets_.push_back(subset);
    ids_.emplace(std::move(subset), id);
    work_.push_back(id);
    return id;
  }

  void expand(int32_t d) {
    const std::vector<int32_t> subset = subsets_[static_cast<size_t>(d)];
    const int32_t rule = pda_.states[static_cast<size_t>(d)].rule;
    const size_t nc = static_cast<size_t>(pda_.num_classes);
    std::vector<std::vector<int32_t>> buckets(nc);
    std::vector<PdaCall> calls;
    for (int32_t s : subset) {
      const auto& st = nfa_.states[static_cast<size_t>(s)];
      for (const auto& e : st.edges)
        for (size_t c = pda_.byte_class[e.lo]; c <= pda_.byte_class[e.hi]; ++c) buckets[c].push_back(e.to);
      calls.insert(calls.end(), st.calls.begin(), st.calls.end());
    }
    std::vector<int32_t> prev_bucket;
    int32_t prev_target = -1;
    for (size_t c = 0; c < nc; ++c) {
      std::vector<int32_t>& b = buckets[c];
      std::sort(b.begin(), b.end());
      b.erase(std::unique(b.begin(), b.end()), b.end());
      int32_t target = -1;
      if (!b.empty()) target = (c > 0 && b == prev_bucket) ? prev_target : intern(closure(b), rule);
      pda_.next[static_cast<size_t>(d) * nc + c] = target;
      prev_bucket = b;
      prev_target = target;
    }
    std::sort(calls.begin(), calls.end(), [](const PdaCall& a, const PdaCall& b) {
      return a.rule != b.rule ? a.rule < b.rule : a.ret < b.ret;
    });
    std::vector<PdaCall> merged;
    for (size_t i = 0; i < calls.size();) {
      size_t j = i;
      std::vector<int32_t> rets;
      while (j < calls.size() && calls[j].rule == calls[i].rule) rets.push_back(calls[j++].ret);
      const int32_t ret = intern(closure(rets), rule);
      if (ret >= 0) merged.push_back({calls[i].rule, ret});
      i = j;
    }
    PdaState& st = pda_.states[static_cast<size_t>(d)];
    st.calls_begin = static_cast<uint32_t>(pda_.calls.size());
    pda_.calls.insert(pda_.calls.end(), merged.begin(), merged.end());
    pda_.states[static_cast<size_t>(d)].calls_end = static_cast<uint32_t>(pda_.calls.size());
  }

  const detail::Nfa& nfa_;
  CompileBudget& budget_;
  Pda pda_;
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 0;
  std::vector<bool> is_accept_, important_;
  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> ids_;
  std::vector<std::vector<int32_t>> subsets_;
  std::vector<int32_t> work_;
};

// Keeps the states that are reachable from the root's start and can reach the end of their
// rule; renumbers them. Throws when the root itself can match nothing.
Pda trim(const Pda& in) {
  const size_t n = in.states.size();
  const size_t nc = static_cast<size_t>(in.num_classes);
  const size_t rules = in.rule_start.size();
  // Productive: a final state, or one with a move to a productive state (a call counts when
  // both the callee's start and the return state are productive).
  std::vector<bool> productive(n, false), rule_ok(rules, false);
  std::vector<std::vector<int32_t>> rev(n), rev_ret(n), rev_rule(rules);
  for (size_t s = 0; s < n; ++s) {
    for (size_t c = 0; c < nc; ++c) {
      const int32_t t = in.next[s * nc + c];
      if (t >= 0) rev[static_cast<size_t>(t)].push_back(static_cast<int32_t>(s));
    }
    for (uint32_t k = in.states[s].calls_begin; k < in.states[s].calls_end; ++k) {
      rev_ret[static_cast<size_t>(in.calls[k].ret)].push_back(static_cast<int32_t>(s));
      rev_rule[static_cast<size_t>(in.calls[k].rule)].push_back(static_cast<int32_t>(s));
    }
  }
  std::vector<std::vector<int32_t>> rules_starting(n);
  for (size_t r = 0; r < rules; ++r)
    if (in.rule_start[r] >= 0) rules_starting[static_cast<size_t>(in.rule_start[r])].push_back(static_cast<int32_t>(r));
  std::vector<int32_t> work;
  auto call_ok = [&](size_t s) {
    for (uint32_t k = in.states[s].calls_begin; k < in.states[s].calls_end; ++k)
      if (rule_ok[static_cast<size_t>(in.calls[k].rule)] && productive[static_cast<size_t>(in.calls[k].ret)])
        return true;
    return false;
  };
  auto mark = [&](size_t s) {
    if (productive[s]) return;
    productive[s] = true;
    work.push_back(static_cast<int32_t>(s));
  };
  for (size_t s = 0; s < n; ++s)
    if (in.states[s].final) mark(s);
  while (!work.empty()) {
    const size_t s = static_cast<size_t>(work.back());
    work.pop_back();
    for (int32_t p : rev[s]) mark(static_cast<size_t>(p));
    for (int32_t p : rev_ret[s])
      if (call_ok(static_cast<size_t>(p))) mark(static_cast<size_t>(p));
    for (int32_t r : rules_starting[s]) {
      rule_ok[static_cast<size_t>(r)] = true;
      for (int32_t p : rev_rule[static_cast<size_t>(r)])
        if (call_ok(static_cast<size_t>(p))) mark(static_cast<size_t>(p));
    }
  }
  if (!rule_ok[static_cast<size_t>(in.root)]) throw GrammarError("grammar: the root rule matches nothing");

  // Reachable from the root's start through productive states only.
  std::vector<int32_t> id(n, -1);
  std::vector<int32_t> order;
  auto visit = [&](int32_t s) {
    if (s < 0 || !productive[static_cast<size_t>(s)] || id[static_cast<size_t>(s)] >= 0) return;
    id[static_cast<size_t>(s)] = static_cast<int32_t>(order.size());
    order.push_back(s);
  };
  visit(in.start());
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t s = static_cast<size_t>(order[i]);
    for (size_t c = 0; c < nc; ++c) visit(in.next[s * nc + c]);
    for (uint32_t k = in.states[s].calls_begin; k < in.states[s].calls_end; ++k) {
      const PdaCall& call = in.calls[k];
      if (!rule_ok[static_cast<size_t>(call.rule)] || !productive[static_cast<size_t>(call.ret)]) continue;
      visit(in.rule_start[static_cast<size_t>(call.rule)]);
      visit(call.ret);
    }
  }
  Pda out;
  out.num_classes = in.num_classes;
  out.byte_class = in.byte_class;
  out.rule_names = in.rule_names;
  out.root = in.root;
  out.rule_start.assign(rules, -1);
  for (size_t r = 0; r < rules; ++r)
    if (rule_ok[r]) out.rule_start[r] = id[static_cast<size_t>(in.rule_start[r])];
  out.states.resize(order.size());
  out.next.assign(order.size() * nc, -1);
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t s = static_cast<size_t>(order[i]);
    PdaState st = in.states[s];
    st.reads = false;
    for (size_t c = 0; c < nc; ++c) {
      const int32_t t = in.next[s * nc + c];
      const int32_t nt = t >= 0 ? id[static_cast<size_t>(t)] : -1;
      out.next[i * nc + c] = nt;
      st.reads = st.reads || nt >= 0;
    }
    st.calls_begin = static_cast<uint32_t>(out.calls.size());
    for (uint32_t k = in.states[s].calls_begin; k < in.states[s].calls_end; ++k) {
      const PdaCall& call = in.calls[k];
      const int32_t ret = id[static_cast<size_t>(call.ret)];
      if (out.rule_start[static_cast<size_t>(call.rule)] < 0 || ret < 0) continue;
      out.calls.push_back({call.rule, ret});
    }
    st.calls_end = static_cast<uint32_t>(out.calls.size());
    out.has_calls = out.has_calls || st.calls_end > st.calls_begin;
    out.states[i] = st;
  }
  return out;
}

// A rule that can call itself before reading a byte would make the matcher's closure push
// forever.
void check_left_recursion(const Pda& pda) {
  const size_t rules = pda.rule_start.size();
  const size_t nc = static_cast<size_t>(pda.num_classes);
  (void)nc;
  std::vector<bool> nullable(rules, false);
  // States reachable from a rule's start without reading a byte, given `nullable`.
  auto byte_free = [&](size_t r, std::vector<int32_t>& called) {
    std::vector<int32_t> stack{pda.rule_start[r]};
    std::vector<bool> seen(pda.states.size(), false);
    bool reaches_end = false;
    seen[static_cast<size_t>(stack[0])] = true;
    while (!stack.empty()) {
      const size_t s = static_cast<size_t>(stack.back());
      stack.pop_back();
      if (pda.states[s].final) reaches_end = true;
      for (uint32_t k = pda.states[s].calls_begin; k < pda.states[s].calls_end; ++k) {
        const PdaCall& c = pda.calls[k];
        called.push_back(c.rule);
        if (nullable[static_cast<size_t>(c.rule)] && !seen[static_cast<size_t>(c.ret)]) {
          seen[static_cast<size_t>(c.ret)] = true;
          stack.push_back(c.ret);
        }
      }
    }
    return reaches_end;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules; ++r) {
      if (nullable[r] || pda.rule_start[r] < 0) continue;
      std::vector<int32_t> ignored;
      if (byte_free(r, ignored)) nullable[r] = changed = true;
    }
  }
  std::vector<std::vector<int32_t>> left(rules);
  for (size_t r = 0; r < rules; ++r)
    if (pda.rule_start[r] >= 0) byte_free(r, left[r]);
  // A cycle in `left` is left recursion.
  std::vector<int> color(rules, 0);
  for (size_t r0 = 0; r0 < rules; ++r0) {
    if (color[r0]) continue;
    std::vector<std::pair<size_t, size_t>> stack{{r0, 0}};
    color[r0] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i < left[r].size()) {
        const size_t t = static_cast<size_t>(left[r][i++]);
        if (color[t] == 1)
          throw GrammarError("grammar: rule '" + pda.rule_names[t] +
                             "' is left-recursive (it can call itself before reading anything)");
        if (color[t] == 0) {
          color[t] = 1;
          stack.push_back({t, 0});
        }
        continue;
      }
      color[r] = 2;
      stack.pop_back();
    }
  }
}

}  // namespace

Pda build_pda(const Grammar& grammar, CompileBudget& budget) {
  grammar.check([&] { budget.check(CompileStage::expand); });
  const detail::RulePlan plan = detail::plan_rules(grammar, budget);
  Pda raw;
  std::vector<std::string> names;
  {
    const detail::Nfa nfa = detail::build_nfa(grammar, plan.pda_rule_of, budget);
    raw = Determinizer(nfa, budget).run();
    for (int32_t r : nfa.grammar_rule) names.push_back(grammar.rule(r).name);
  }  // the NFA's memory goes before trimming needs its own
  raw.root = 0;
  raw.rule_names = std::move(names);
  for (size_t r = 0; r < raw.rule_start.size(); ++r)
    if (raw.rule_start[r] < 0 && static_cast<int32_t>(r) == raw.root)
      throw GrammarError("grammar: the root rule matches nothing");
  budget.charge(static_cast<int64_t>(raw.next.size() * sizeof(int32_t) * 4 + raw.states.size() * 64),
                CompileStage::trim);
  Pda pda = trim(raw);
  budget.check(CompileStage::trim);
  check_left_recursion(pda);
  return pda;
}

std::vector<int32_t> mask_classes(const Pda& pda, int32_t depth, CompileBudget& budget) {
  const size_t n = pda.states.size();
  const size_t nc = static_cast<size_t>(pda.num_classes);
  std::vector<bool> rule_calls(pda.rule_start.size(), false);
  for (const PdaState& s : pda.states)
    if (s.calls_end > s.calls_begin) rule_calls[static_cast<size_t>(s.rule)] = true;
  std::vector<int32_t> cls(n);
  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> ids;
  std::vector<int32_t> sig;
  auto assign = [&](std::vector<int32_t>& out, auto&& signature) {
    ids.clear();
    for (size_t s = 0; s < n; ++s) {
      if ((s & 0xFFF) == 0xFFF) budget.check(CompileStage::classes);
      sig.clear();
      signature(s, sig);
      auto [it, inserted] = ids.emplace(sig, static_cast<int32_t>(ids.size()));
      out[s] = it->second;
    }
    return ids.size();
  };
  size_t count = assign(cls, [&](size_t s, std::vector<int32_t>& v) {
    v.push_back(pda.states[s].final);
    v.push_back(rule_calls[static_cast<size_t>(pda.states[s].rule)] ? pda.states[s].rule : -1);
  });
  bool stable = false;
  std::vector<int32_t> next_cls(n);
  // The signature index: one vector of about nc + 2 ints per state, with its node and header.
  budget.charge(static_cast<int64_t>(n * ((nc + 4) * sizeof(int32_t) + 96)), CompileStage::classes);
  for (int32_t round = 0; round < depth; ++round) {
    budget.check(CompileStage::classes);
    const size_t c2 = assign(next_cls, [&](size_t s, std::vector<int32_t>& v) {
      v.push_back(cls[s]);
      for (size_t c = 0; c < nc; ++c) {
        const int32_t t = pda.next[s * nc + c];
        v.push_back(t >= 0 ? cls[static_cast<size_t>(t)] : -1);
      }
      for (uint32_t k = pda.states[s].calls_begin; k < pda.states[s].calls_end; ++k) {
        v.push_back(pda.calls[k].rule);
        v.push_back(cls[static_cast<size_t>(pda.calls[k].ret)]);
      }
    });
    cls.swap(next_cls);
    if (c2 == count) {
      stable = true;
      break;
    }
    count = c2;
  }
  if (!stable) {
    int32_t next_id = static_cast<int32_t>(count);
    for (size_t s = 0; s < n; ++s)
      if (rule_calls[static_cast<size_t>(pda.states[s].rule)]) cls[s] = next_id++;
  }
  return cls;
}

}  // namespace ds::grammar
