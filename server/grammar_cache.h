// GrammarCache: the compiled grammars of structured outputs, per served model, shared by
// requests that ask for the same constraint (the same schema, tools, regex or grammar text).
//
// Compiling precomputes token masks over the whole vocabulary (model/grammar/compiler.h:
// milliseconds for a tool schema, up to seconds for schemas with long bounded strings), so a
// client that repeats its schema pays it once. Least recently used entries go first beyond
// `capacity`. Compilation runs on the request's thread, outside the lock; two requests that
// miss on one key at once both compile, and the second result is kept.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "model/grammar/compiler.h"
#include "model/grammar/grammar.h"
#include "model/grammar/vocabulary.h"

namespace ds::server {

class GrammarCache {
 public:
  explicit GrammarCache(std::shared_ptr<const grammar::TokenVocabulary> vocab, size_t capacity = 64);

  // The grammar compiled for `key`, building and compiling it with `build` on a miss.
  // GrammarError from either propagates.
  std::shared_ptr<const grammar::CompiledGrammar> get(const std::string& key,
                                                      const std::function<grammar::Grammar()>& build);
  const grammar::TokenVocabulary& vocabulary() const { return *vocab_; }
  size_t size() const;

 private:
  using Lru = std::list<std::pair<std::string, std::shared_ptr<const grammar::CompiledGrammar>>>;
  std::shared_ptr<const grammar::TokenVocabulary> vocab_;
  size_t capacity_;
  mutable std::mutex mu_;
  Lru lru_;  // most recent first
  std::unordered_map<std::string, Lru::iterator> index_;
};

}  // namespace ds::server
