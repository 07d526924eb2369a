// Chain keys of full K/V blocks: key(block i) = hash(key(block i-1), tokens of block i), so a
// key names a block's contents together with everything before it. 64-bit and fast; the
// prefix cache verifies tokens and parents on every match, so a collision costs a miss, never
// a wrong hit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ds::kvcache {

using PrefixKey = uint64_t;

inline PrefixKey chain_key(PrefixKey parent, std::span<const int32_t> block_tokens) {
  // splitmix64 steps over the parent and each token.
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(parent ^ 0x5bd1e9955bd1e995ull);
  for (int32_t t : block_tokens) h = mix(h ^ static_cast<uint32_t>(t));
  return h;
}

// A second, independent chain hash of the same blocks (another seed), kept beside the key
// where a block's parent cannot be checked by identity: the host tier (host_cache.h) matches a
// block by key, check, parent key and its own tokens, so a wrong hit needs two independent
// 64-bit hashes of different prefixes to collide at once.
inline PrefixKey check_key(PrefixKey parent_check, std::span<const int32_t> block_tokens) {
  return chain_key(parent_check ^ 0x2545f4914f6cdd1dull, block_tokens) * 0xd6e8feb86659fd93ull;
}

// The chain keys of the full blocks of `tokens` (tokens.size() / block_size of them).
inline std::vector<PrefixKey> prefix_keys(std::span<const int32_t> tokens, int32_t block_size) {
  std::vector<PrefixKey> keys;
  const size_t n = tokens.size() / static_cast<size_t>(block_size);
  keys.reserve(n);
  PrefixKey k = 0;
  for (size_t i = 0; i < n; ++i) {
    k = chain_key(k, tokens.subspan(i * static_cast<size_t>(block_size), static_cast<size_t>(block_size)));
    keys.push_back(k);
  }
  return keys;
}

}  // namespace ds::kvcache
