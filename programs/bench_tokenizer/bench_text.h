// Deterministic synthetic text for the tokenizer benchmark: English prose, source code and
// CJK text, generated from a seeded PRNG so every run measures the same bytes without any
// external corpus. Each generator mixes a frequent core (common words, keywords, common
// characters) with a long tail of made-up words or identifiers, so the BPE cache sees both
// hits and misses as it does on real text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ds::tok::bench {

std::string english_prose(std::size_t bytes, uint64_t seed);
std::string source_code(std::size_t bytes, uint64_t seed);
std::string cjk_text(std::size_t bytes, uint64_t seed);

}  // namespace ds::tok::bench
