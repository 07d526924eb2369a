// The NFA stage of build_pda (pda.h): Thompson's construction over bytes, with non-recursive
// rules inlined and references to recursive rules left as call edges. Private to pda.cpp and
// its tests.
#pragma once

#include <cstdint>
#include <vector>

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

// Which Grammar rules stay rules (the root and every rule on a reference cycle): the Pda rule
// index of each Grammar rule, or -1 for one that is inlined where it is used.
std::vector<int32_t> pda_rule_numbers(const Grammar& grammar);

// One NFA for all Pda rules. Throws GrammarError past max_states.
Nfa build_nfa(const Grammar& grammar, const std::vector<int32_t>& pda_rule_of, int64_t max_states);

}  // namespace ds::grammar::detail
