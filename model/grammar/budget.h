// CompileBudget: what one grammar compile may spend, enforced inside the compiler.
//
// A constraint is request input, and a few hundred bytes of it can describe an automaton of
// billions of states (a counted repetition of a counted repetition, searched). Every stage of
// compile() (compiler.h) therefore draws on one budget:
//  * states: the NFA and the determinised automaton each hold at most `max_states`;
//  * memory: each stage charges what it holds (states, subsets, transition rows, masks) and
//    the compile fails once the total passes `max_bytes`;
//  * time: the compile fails once it has run `max_time`;
//  * masks: at most `max_masks` distinct token masks (each a walk of the vocabulary);
//  * cancellation: a flag its owner sets (the client went away) ends it at the next check.
// The budget starts before the constraint is read: turning a request's schema or pattern into
// a Grammar (regex.h, json_schema.h) draws on the same time and cancellation (stage parse).
// The stages check often enough that a compile stops within milliseconds of any of these.
// The errors say which limit was reached, at which stage, and what in a constraint causes
// that (the advice a 400 gives the client).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "model/grammar/grammar.h"

namespace ds::grammar {

struct CompileLimits {
  int64_t max_states = 500'000;
  int64_t max_bytes = int64_t{256} << 20;
  std::chrono::milliseconds max_time{10'000};
  int32_t max_masks = 16384;
};

// The compile was cancelled by its owner: nothing is wrong with the grammar.
struct CompileCancelled : std::runtime_error {
  CompileCancelled() : std::runtime_error("grammar: the compile was cancelled") {}
};

// The stages of a compile, for messages.
enum class CompileStage { parse, expand, determinise, trim, classes, masks };

class CompileBudget {
 public:
  explicit CompileBudget(const CompileLimits& limits = {}, const std::atomic<bool>* cancel = nullptr);

  const CompileLimits& limits() const { return limits_; }
  // Throws CompileCancelled once cancelled, GrammarError once past the time limit.
  void check(CompileStage stage) const;
  // Adds bytes held by the compile; throws GrammarError once past max_bytes (and checks time).
  void charge(int64_t bytes, CompileStage stage);
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  // Throws the GrammarError of a stage that needs more than `limit` of `what` (states, masks).
  [[noreturn]] static void too_large(CompileStage stage, const std::string& what, int64_t limit);

 private:
  CompileLimits limits_;
  const std::atomic<bool>* cancel_;
  std::chrono::steady_clock::time_point start_, deadline_;
  std::atomic<int64_t> bytes_{0};
};

}  // namespace ds::grammar
