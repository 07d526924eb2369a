#include "programs/bench_serve/random_prompt.h"

#include <algorithm>
#include <iterator>
#include <cmath>
#include <string_view>

namespace ds::bench {

namespace {

// Common English words: in byte-level BPE vocabularies of 100k+ entries each is one token
// with its leading space.
constexpr std::string_view kWords[] = {
    "the",     "of",      "and",     "to",      "in",      "is",      "that",    "for",     "it",
    "as",      "was",     "with",    "be",      "by",      "on",      "not",     "he",      "this",
    "are",     "or",      "his",     "from",    "at",      "which",   "but",     "have",    "an",
    "had",     "they",    "you",     "were",    "their",   "one",     "all",     "we",      "can",
    "her",     "has",     "there",   "been",    "if",      "more",    "when",    "will",    "would",
    "who",     "so",      "no",      "she",     "other",   "its",     "may",     "these",   "what",
    "them",    "than",    "some",    "him",     "time",    "into",    "only",    "do",      "like",
    "then",    "could",   "also",    "two",     "first",   "any",     "my",      "now",     "such",
    "new",     "over",    "man",     "our",     "even",    "most",    "made",    "after",   "many",
    "people",  "must",    "before",  "very",    "through", "back",    "years",   "where",   "much",
    "your",    "way",     "well",    "down",    "should",  "because", "each",    "just",    "those",
    "how",     "too",     "little",  "state",   "good",    "world",   "work",    "still",   "life",
    "long",    "own",     "while",   "last",    "might",   "great",   "old",     "year",    "off",
    "come",    "since",   "against", "go",      "came",    "right",   "used",    "take",    "three",
    "water",   "place",   "small",   "found",   "part",    "general", "number",  "never",   "house",
    "between", "city",    "under",   "both",    "school",  "story",   "system",  "group",   "point",
    "day",     "same",    "another", "know",    "voice",   "light",   "hand",    "high",    "open",
    "order",   "power",   "game",    "field",   "river",   "market",  "music"};

}  // namespace

RandomPrompt::RandomPrompt(uint64_t seed, int64_t vocab_size) : rng_(seed), vocab_size_(vocab_size) {}

std::vector<int32_t> RandomPrompt::ids(int n) {
  std::uniform_int_distribution<int64_t> pick(0, vocab_size_ - 1);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (auto& id : out) id = static_cast<int32_t>(pick(rng_));
  return out;
}

std::string RandomPrompt::words(int n) {
  std::uniform_int_distribution<size_t> pick(0, std::size(kWords) - 1);
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (i) out += ' ';
    out += kWords[pick(rng_)];
  }
  return out;
}

Json RandomPrompt::prompt(int n) { return exact() ? Json(ids(n)) : Json(words(n)); }

int RandomPrompt::length(int len, double ratio) {
  if (ratio <= 0) return len;
  const int lo = std::max(1, static_cast<int>(std::floor(len * (1 - ratio))));
  const int hi = std::max(lo, static_cast<int>(std::ceil(len * (1 + ratio))));
  return std::uniform_int_distribution<int>(lo, hi)(rng_);
}

}  // namespace ds::bench
