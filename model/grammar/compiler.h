// compile(): a Grammar and a vocabulary -> a CompiledGrammar that matchers (matcher.h) run.
//
// Compiling builds the Pda (pda.h), then precomputes, for every state that reads bytes, the
// part of its token mask that does not depend on the stack below it (xgrammar's adaptive
// token mask): walking the whole vocabulary trie from the state alone, with the bottom frame
// standing for "whatever called this rule", each text token is
//  * accepted: it can be read without leaving the rule (or it ends exactly where the rule
//    may end): accepted in every context;
//  * rejected: no path reads it, even one that leaves the rule;
//  * or it leaves the rule with bytes still to read (an "escape" node of the trie, e.g. `}`
//    followed by `,` when the state can close an object): only the real stack can say, so the
//    matcher walks the subtree of each escape node from the caller's state at run time.
// Since non-recursive rules are inlined, most of a JSON schema is one rule and escapes are
// rare: the mask of a state is mostly a precomputed list or bitmask, copied per token.
//
// States whose next `max token length` bytes behave alike share one mask (mask_classes), so
// a long counted repetition costs one mask, not one per count. A CompiledGrammar is immutable
// and shared by every matcher of every request that uses the same constraint.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/grammar/budget.h"
#include "model/grammar/grammar.h"
#include "model/grammar/pda.h"
#include "model/grammar/vocabulary.h"

namespace ds::grammar {

// The precomputed mask of one (class of) state(s).
struct StateMask {
  enum class Kind : uint8_t {
    accept_list,  // tokens: the accepted ones (few)
    reject_list,  // tokens: the text tokens NOT accepted (few)
    bitmask,      // bits: the accepted ones (many of both)
  };
  Kind kind = Kind::accept_list;
  std::vector<int32_t> tokens;
  std::vector<uint32_t> bits;
  std::vector<int32_t> escapes;  // trie nodes to resolve against the caller
};

struct CompileStats {
  int32_t rules = 0;             // rules kept as rules (recursive ones and the root)
  int32_t states = 0;            // Pda states
  int32_t reading_states = 0;    // states with a mask
  int32_t masks = 0;             // distinct masks computed
  int64_t escape_nodes = 0;
  int64_t mask_bytes = 0;
  int64_t bytes = 0;             // what the compiled grammar holds: masks and automaton
  int64_t budget_bytes = 0;      // the most the compile charged to its budget (budget.h)
  double pda_seconds = 0, mask_seconds = 0;
};

struct CompileOptions {
  // Threads computing masks (0: the machine's cores, at most 16). Masks are independent, so
  // a grammar with thousands of states compiles that many times faster.
  int32_t threads = 0;
  // What the compile may spend (budget.h).
  CompileLimits limits;
  // Set by the owner to end the compile early (it then throws CompileCancelled).
  const std::atomic<bool>* cancel = nullptr;
};

class CompiledGrammar {
 public:
  const Pda& pda() const { return pda_; }
  const TokenVocabulary& vocabulary() const { return *vocab_; }
  const std::shared_ptr<const TokenVocabulary>& vocabulary_ptr() const { return vocab_; }
  // For a state that reads bytes.
  const StateMask& mask(int32_t state) const {
    return masks_[static_cast<size_t>(mask_of_[static_cast<size_t>(state)])];
  }
  const CompileStats& stats() const { return stats_; }

 private:
  friend std::shared_ptr<const CompiledGrammar> compile(const Grammar&, std::shared_ptr<const TokenVocabulary>,
                                                        const CompileOptions&, CompileBudget&);
  Pda pda_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<StateMask> masks_;
  std::vector<int32_t> mask_of_;  // state -> masks_ index (-1: the state does not read)
  CompileStats stats_;
};

// Throws GrammarError (its message says what is wrong or which limit was reached, and why),
// or CompileCancelled.
std::shared_ptr<const CompiledGrammar> compile(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocab,
                                               const CompileOptions& options = {});
// The same, drawing on a budget that reading the constraint already drew on (its limits and
// cancel flag are the budget's; options.limits and options.cancel are not read).
std::shared_ptr<const CompiledGrammar> compile(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocab,
                                               const CompileOptions& options, CompileBudget& budget);

}  // namespace ds::grammar
