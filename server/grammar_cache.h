// GrammarCache: the compiled grammars of structured outputs, per served model, and the bounded
// pool that compiles them.
//
// Compiling precomputes token masks over the whole vocabulary (model/grammar/compiler.h:
// milliseconds for a tool schema, up to seconds for schemas with long bounded strings), and a
// constraint is request input, so compiles are treated as the untrusted work they are:
//  * they run on `concurrency` worker threads, never on the request's thread; at most
//    `max_waiting` more wait in order, beyond that a request is refused (GrammarBusy: a 503);
//  * each draws on a budget of states, memory and time (CompileLimits, model/grammar/budget.h);
//  * a request waits for its compile while watching its client (`gone`): a client that leaves
//    stops waiting at once, and a compile nobody waits for any more is cancelled within
//    milliseconds, so an abandoned request costs no further CPU or memory;
//  * requests for a key already being compiled wait for that compile instead of starting
//    another, and a key that failed (a GrammarError: a syntax error, an unsupported feature, a
//    limit) keeps failing at once: a repeated bomb is refused in microseconds. A time-limit
//    failure is remembered for a minute only, since it may have been the machine's load.
// Compiled grammars are kept least recently used first out, up to `capacity` entries and
// `max_cache_bytes` of masks and automata. After a compile that held much memory the heap is
// trimmed, so a refused bomb leaves the process's resident size where it was.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/grammar/budget.h"
#include "model/grammar/compiler.h"
#include "model/grammar/grammar.h"
#include "model/grammar/vocabulary.h"

namespace ds::server {

struct GrammarCacheOptions {
  size_t capacity = 64;                         // compiled grammars and remembered failures kept
  int64_t max_cache_bytes = int64_t{256} << 20;  // of those compiled grammars
  grammar::CompileLimits limits;                 // per compile
  int32_t concurrency = 2;                       // compiles running at once
  int32_t max_waiting = 64;                      // compiles queued behind them
  int32_t mask_threads = 0;                      // threads of one compile's mask stage (0: cores / concurrency)
};

// The compile queue is full: the request should be retried later (503).
struct GrammarBusy : std::runtime_error {
  GrammarBusy() : std::runtime_error("too many structured-output grammars are compiling; retry shortly") {}
};

class GrammarCache {
 public:
  explicit GrammarCache(std::shared_ptr<const grammar::TokenVocabulary> vocab, GrammarCacheOptions options = {});
  ~GrammarCache();  // cancels running compiles and joins the workers
  GrammarCache(const GrammarCache&) = delete;
  GrammarCache& operator=(const GrammarCache&) = delete;

  // Builds the grammar to compile. It runs on a worker, possibly after the request that asked
  // for it has gone, so it must own everything it reads (capture by value). It draws on the
  // compile's budget (time, cancellation) while it reads the constraint.
  using Build = std::function<grammar::Grammar(const grammar::CompileBudget&)>;
  // Polled while waiting: true once the client is gone.
  using Gone = std::function<bool()>;

  // The grammar compiled for `key`: from the cache, from a compile of the same key already
  // under way, or from a new one. Throws GrammarError (the constraint's fault), GrammarBusy,
  // or CompileCancelled (the client left: `gone` said so).
  std::shared_ptr<const grammar::CompiledGrammar> get(const std::string& key, Build build, const Gone& gone = {});

  const grammar::TokenVocabulary& vocabulary() const { return *vocab_; }
  const GrammarCacheOptions& options() const { return options_; }
  size_t size() const;
  // Compiles queued or running (tests, and how long a shutdown waits).
  size_t compiles_in_flight() const;

 private:
  enum class Failure;
  struct Job;
  struct Entry {
    std::string key;
    std::shared_ptr<const grammar::CompiledGrammar> compiled;  // null: a remembered failure
    std::string error;
    std::chrono::steady_clock::time_point expires;  // failures only; max(): never
    int64_t bytes = 0;
  };
  using Lru = std::list<Entry>;

  void work();
  void finish(const std::shared_ptr<Job>& job);
  void remember(Entry e);  // under mu_

  std::shared_ptr<const grammar::TokenVocabulary> vocab_;
  GrammarCacheOptions options_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  Lru lru_;  // most recent first
  std::unordered_map<std::string, Lru::iterator> index_;
  int64_t cached_bytes_ = 0;
  std::deque<std::shared_ptr<Job>> queue_;
  std::unordered_map<std::string, std::shared_ptr<Job>> in_flight_;  // queued or running
  bool stopping_ = false;
  std::vector<pthread_t> workers_;  // started with kWorkerStack of stack (grammar_cache.cpp)
};

}  // namespace ds::server
