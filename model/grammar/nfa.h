// The NFA stage of build_pda (pda.h): Thompson's construction over bytes, with the rules the
// plan inlines (rule_plan.h) inlined and references to the others left as call edges. Private
// to pda.cpp and its tests.
#pragma once

#include <cstdint>
#include <vector>

#include "model/grammar/budget.h"
#include "model/grammar/grammar.h"
#include "model/grammar/pda.h"

namespace ds::grammar::detail {

struct Nfa {
  struct Edge {
    uint8_t lo, hi;  // inclusive byte range
    int32_t to;
  };
  struct State {
    std::vector<int32_t> eps;
    std::vector<Edge> edges;
    std::vector<PdaCall> calls;  // rule = Pda rule index, ret = NFA state
  };
  std::vector<State> states;
  std::vector<int32_t> rule_of;  // state -> Pda rule
  // Per Pda rule: its entry and exit states and the Grammar rule it came from.
  std::vector<int32_t> start, accept, grammar_rule;
};

// Bytes an NFA state holds, with its edge lists, as the budget counts them.
inline constexpr int64_t kNfaStateBytes = 160;

// One NFA for all Pda rules (pda_rule_of: rule_plan.h). Throws GrammarError past the budget's
// states, memory or time.
Nfa build_nfa(const Grammar& grammar, const std::vector<int32_t>& pda_rule_of, CompileBudget& budget);

}  // namespace ds::grammar::detail
