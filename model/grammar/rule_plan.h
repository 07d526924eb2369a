// Which rules of a Grammar the compiler keeps as rules of the pushdown automaton, and how
// large the automaton will be: the first stage of build_pda (pda.h). Private to the compiler
// and its tests.
//
// A rule that is not recursive is normally inlined where it is used, which lets the compiler
// see a whole JSON object as one automaton. But inlining copies: a rule used under a counted
// repetition, or from several places, is emitted once per use, and a schema whose arrays hold
// objects holding arrays would multiply those copies level by level. So a rule stays a rule
// of its own (its automaton built once, called from each use through the stack) when it is
// recursive, or when inlining it would copy more than kInlineBudget states in all. The
// decision is made top-down over the rules' reference DAG, so a rule inside a kept rule is
// counted once per copy of that rule's own body, and the automaton's size stays linear in the
// grammar for nested schemas.
//
// The plan also estimates the automaton's states before any is built, so a grammar far
// beyond the budget is refused at once (budget.h), not after minutes of expansion.
#pragma once

#include <cstdint>
#include <vector>

#include "model/grammar/budget.h"
#include "model/grammar/grammar.h"

namespace ds::grammar::detail {

// Copies of one rule beyond this many states in all make it a rule of its own.
inline constexpr int64_t kInlineBudget = 32768;

struct RulePlan {
  std::vector<int32_t> pda_rule_of;  // Grammar rule -> Pda rule (the root is 0), or -1: inlined
  int64_t states = 0;                // the automaton's estimated states (saturating)
};

// Throws GrammarError (CompileBudget::too_large) when the estimate exceeds max_states.
RulePlan plan_rules(const Grammar& grammar, const CompileBudget& budget);

}  // namespace ds::grammar::detail
