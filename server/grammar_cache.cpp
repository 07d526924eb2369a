// GrammarCache (grammar_cache.h).
#include "server/grammar_cache.h"

namespace ds::server {

GrammarCache::GrammarCache(std::shared_ptr<const grammar::TokenVocabulary> vocab, size_t capacity)
    : vocab_(std::move(vocab)), capacity_(capacity == 0 ? 1 : capacity) {}

std::shared_ptr<const grammar::CompiledGrammar> GrammarCache::get(const std::string& key,
                                                                  const std::function<grammar::Grammar()>& build) {
  {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  auto compiled = grammar::compile(build(), vocab_);
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) {
    it->second->second = compiled;
    lru_.splice(lru_.begin(), lru_, it->second);
  } else {
    lru_.emplace_front(key, compiled);
    index_.emplace(key, lru_.begin());
    while (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  return compiled;
}

size_t GrammarCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace ds::server
