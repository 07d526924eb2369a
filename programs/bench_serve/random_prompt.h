// RandomPrompt: the random prompt material of the synthetic datasets.
//
// Token ids: uniform in [0, vocab_size), exact lengths, for /v1/completions (which takes a
// list of ids as its prompt). Words: for chat messages, and for completions when the
// vocabulary size is not given; a fixed list of common English words, each about one token
// in the vocabularies of large models, so a prompt of n words is about n tokens (the server's
// usage chunk gives the true count, which is what bench_serve reports).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "programs/bench_serve/bench_json.h"

namespace ds::bench {

class RandomPrompt {
 public:
  // vocab_size 0: prompts() gives words.
  RandomPrompt(uint64_t seed, int64_t vocab_size);

  // n random token ids.
  std::vector<int32_t> ids(int n);
  // n random words separated by spaces.
  std::string words(int n);
  // A completions prompt of about n tokens: ids when the vocabulary size is known, else words.
  Json prompt(int n);
  // A length drawn uniformly from [len * (1 - ratio), len * (1 + ratio)], at least 1.
  int length(int len, double ratio);

  bool exact() const { return vocab_size_ > 0; }

 private:
  std::mt19937_64 rng_;
  int64_t vocab_size_;
};

}  // namespace ds::bench
