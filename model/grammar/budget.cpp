// CompileBudget (budget.h).
#include "model/grammar/budget.h"

#include <cstdio>

namespace ds::grammar {
namespace {

const char* stage_name(CompileStage s) {
  switch (s) {
    case CompileStage::parse: return "reading the constraint";
    case CompileStage::expand: return "expanding the grammar into an automaton";
    case CompileStage::determinise: return "determinising the automaton";
    case CompileStage::trim: return "trimming the automaton";
    case CompileStage::classes: return "grouping the automaton's states";
    case CompileStage::masks: return "computing token masks";
  }
  return "compiling";
}

// What makes each stage large, in the terms of a constraint's author.
const char* stage_advice(CompileStage s) {
  switch (s) {
    case CompileStage::parse:
      return "each distinct character class of a pattern is its own automaton: use fewer distinct classes or a "
             "shorter pattern";
    case CompileStage::expand:
      return "counted repetitions ({n,m}, minLength/maxLength, minItems/maxItems) copy what they repeat, so "
             "repetitions of repetitions multiply, and every literal (enum and const values, property names) adds "
             "its length: lower the counts or use fewer literals";
    case CompileStage::determinise:
      return "a pattern that is searched (a JSON Schema 'pattern' without ^ and $) or alternatives that overlap "
             "multiply the states of the counted repetitions inside them: anchor the pattern with ^...$, make the "
             "alternatives distinct, or lower the counts";
    case CompileStage::trim:
    case CompileStage::classes:
      return "its automaton is too large to analyse: every literal (enum and const values, property names) and "
             "every counted repetition adds states: use fewer or shorter ones";
    case CompileStage::masks:
      return "each position of the automaton that allows different tokens needs its own token mask: thousands of "
             "different literals (enum values, property names), or a searched pattern whose states multiply "
             "(anchor it with ^...$): use fewer";
  }
  return "";
}

}  // namespace

CompileBudget::CompileBudget(const CompileLimits& limits, const std::atomic<bool>* cancel)
    : limits_(limits), cancel_(cancel), start_(std::chrono::steady_clock::now()),
      deadline_(start_ + limits.max_time) {}

void CompileBudget::check(CompileStage stage) const {
  if (cancel_ && cancel_->load(std::memory_order_relaxed)) throw CompileCancelled();
  if (std::chrono::steady_clock::now() > deadline_) {
    const double secs = std::chrono::duration<double>(limits_.max_time).count();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", secs);
    throw GrammarError(std::string("grammar: compiling took longer than the limit of ") + buf + " s (while " +
                       stage_name(stage) + "); " + stage_advice(stage));
  }
}

void CompileBudget::charge(int64_t bytes, CompileStage stage) {
  const int64_t total = bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (total > limits_.max_bytes)
    throw GrammarError("grammar: too large: compiling it needs more than the limit of " +
                       std::to_string(limits_.max_bytes >> 20) + " MiB (while " + stage_name(stage) + "); " +
                       stage_advice(stage));
  check(stage);
}

void CompileBudget::too_large(CompileStage stage, const std::string& what, int64_t limit) {
  throw GrammarError("grammar: too large: more than " + std::to_string(limit) + " " + what + " (while " +
                     stage_name(stage) + "); " + stage_advice(stage));
}

}  // namespace ds::grammar
