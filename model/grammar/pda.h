// Pda: a Grammar compiled to one deterministic byte automaton per recursive rule, joined by
// call edges: a pushdown automaton that the matcher (matcher.h) runs with a stack.
//
// How a Grammar becomes a Pda:
//  1. Rules that are not recursive are inlined wherever they are used, so only the root,
//     rules on a reference cycle (a JSON value inside an object inside a value...) and rules
//     whose copies would cost too much (rule_plan.h) remain as rules of their own. Inlining
//     makes large regions of a grammar (a whole JSON object with its strings, numbers and
//     whitespace) one automaton, so the tokens that cross from a string into what follows it
//     are judged once, at compile time, instead of at every step.
//  2. Each remaining rule becomes an NFA (Thompson's construction; a reference to a recursive
//     rule is a call edge) and is determinised by the subset construction over byte classes
//     (the bytes no edge of the grammar tells apart share one class). Calls of one rule from
//     one subset are merged, so a state has at most one call edge per rule.
//  3. States that cannot reach the end of their rule are removed (a token may never lead into
//     a dead end), and left recursion (a rule calling itself before reading a byte) is refused.
// Every stage draws on the compile's budget (budget.h): states, memory, time, cancellation.
//
// A state is `final` when its rule may end there: the matcher then pops back to the state the
// caller resumes in (its call edge's `ret`). A state reads bytes through `next`, and may call
// rules; the matcher's closure (stack.h) follows calls and returns until every stack top is a
// state that reads bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/grammar/budget.h"
#include "model/grammar/grammar.h"

namespace ds::grammar {

struct PdaCall {
  int32_t rule;  // Pda rule index
  int32_t ret;   // the caller's state after the callee ends
};

struct PdaState {
  int32_t rule = 0;
  bool final = false;      // the rule may end here
  bool reads = false;      // some byte moves it
  uint32_t calls_begin = 0, calls_end = 0;  // into Pda::calls
};

struct Pda {
  int32_t num_classes = 0;
  std::array<uint8_t, 256> byte_class{};  // byte -> class
  std::vector<int32_t> next;              // [state * num_classes + class] -> state, or -1
  std::vector<PdaState> states;
  std::vector<PdaCall> calls;
  std::vector<int32_t> rule_start;        // Pda rule -> its start state
  std::vector<std::string> rule_names;
  int32_t root = 0;                       // Pda rule of the grammar's root
  bool has_calls = false;

  int32_t step(int32_t state, uint8_t byte) const {
    return next[static_cast<size_t>(state) * static_cast<size_t>(num_classes) + byte_class[byte]];
  }
  int32_t start() const { return rule_start[static_cast<size_t>(root)]; }
  size_t num_states() const { return states.size(); }
};

// Throws GrammarError (left recursion, a grammar that matches nothing, a limit of the budget)
// or CompileCancelled.
Pda build_pda(const Grammar& grammar, CompileBudget& budget);

// For each state, a class id such that two states of one class accept the same byte strings
// of up to `depth` bytes, ending or leaving their rule at the same points (Moore's partition
// refinement, `depth` rounds or until stable). States of rules with call edges share a class
// only when the refinement became stable, since a call may read no byte. What lets the
// compiler compute one token mask for the thousand states of a string with maxLength 1000.
std::vector<int32_t> mask_classes(const Pda& pda, int32_t depth, CompileBudget& budget);

}  // namespace ds::grammar
