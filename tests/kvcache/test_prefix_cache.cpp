// PrefixCache: chain-keyed blocks verified by tokens and parents, snapshots at block ends,
// LRU eviction only of blocks nobody else holds (deepest first), and a randomized run that
// checks the accounting after every operation.
#include <catch2/catch.hpp>

#include <random>

#include "kvcache/prefix_cache.h"

using namespace ds::kvcache;

namespace {

constexpr int32_t kBs = 4;

std::vector<int32_t> seq(int32_t first, int32_t n) {
  std::vector<int32_t> v;
  for (int32_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

// A sequence that computed `tokens` into fresh blocks of `pool`.
BlockTable computed(BlockPool& pool, const std::vector<int32_t>& tokens) {
  BlockTable t(kBs);
  auto r = pool.reserve(t.blocks_needed(static_cast<int64_t>(tokens.size())));
  REQUIRE(r);
  pool.commit(*r, t);
  t.append_tokens(static_cast<int64_t>(tokens.size()));
  return t;
}

}  // namespace

TEST_CASE("prefix cache: a hit is the longest cached chain ending at a snapshot", "[prefix_cache]") {
  BlockPool pool(16, kBs);
  PrefixCache cache(pool, 100, 4);
  const auto a = seq(0, 14);  // 3 full blocks + 2 tokens
  const auto keys = prefix_keys(a, kBs);
  REQUIRE(keys.size() == 3);
  BlockTable ta = computed(pool, a);
  cache.insert(ta, a, keys, 14);
  CHECK(cache.stats().blocks == 3);
  // Blocks but no snapshot: nothing to resume from.
  auto miss = cache.lookup(a, keys, 13);
  CHECK(miss.tokens == 0);
  CHECK(miss.matched_tokens == 12);
  // A snapshot after block 2 (position 8).
  const auto slot = cache.add_snapshot(a, keys, 8);
  REQUIRE(slot);
  CHECK(*slot == 100);
  CHECK_FALSE(cache.add_snapshot(a, keys, 8));  // one per block
  CHECK_FALSE(cache.add_snapshot(a, keys, 6));  // not a block end
  CHECK(cache.has_snapshot(a, keys, 8));
  auto hit = cache.lookup(a, keys, 13);
  CHECK(hit.tokens == 8);
  CHECK(hit.snapshot == 100);
  REQUIRE(hit.blocks.size() == 2);
  CHECK(hit.blocks[0] == ta.blocks()[0]);
  CHECK(hit.blocks[1] == ta.blocks()[1]);
  // max_tokens bounds the hit (a prompt must keep one token to compute).
  CHECK(cache.lookup(a, keys, 7).tokens == 0);

  // Another prompt sharing the first 9 tokens hits at 8; one that differs in block 1 misses.
  auto b = seq(0, 9);
  b.push_back(77);
  b.push_back(78);
  b.push_back(79);
  CHECK(cache.lookup(b, prefix_keys(b, kBs), 11).tokens == 8);
  auto c = a;
  c[5] = 99;
  CHECK(cache.lookup(c, prefix_keys(c, kBs), 13).tokens == 0);
  CHECK(cache.lookup(c, prefix_keys(c, kBs), 13).matched_tokens == 4);
  cache.check_invariants();
  cache.release(ta);
  cache.check_invariants();
}

TEST_CASE("prefix cache: a key collision never becomes a wrong hit", "[prefix_cache]") {
  BlockPool pool(8, kBs);
  PrefixCache cache(pool, 10, 2);
  const auto a = seq(0, 8);
  const auto keys = prefix_keys(a, kBs);
  BlockTable ta = computed(pool, a);
  cache.insert(ta, a, keys, 8);
  REQUIRE(cache.add_snapshot(a, keys, 8));
  // Other tokens presented under a's keys (as if their hashes collided): no hit.
  const auto other = seq(50, 8);
  CHECK(cache.lookup(other, keys, 8).tokens == 0);
  CHECK(cache.lookup(other, keys, 8).matched_tokens == 0);
  cache.release(ta);
}

TEST_CASE("prefix cache: used blocks are shared and never evicted; released ones are, deepest first",
          "[prefix_cache]") {
  BlockPool pool(6, kBs);
  PrefixCache cache(pool, 10, 2);
  const auto a = seq(0, 12);
  const auto keys = prefix_keys(a, kBs);
  BlockTable ta = computed(pool, a);  // blocks 0, 1, 2
  cache.insert(ta, a, keys, 12);
  REQUIRE(cache.add_snapshot(a, keys, 8));
  CHECK(cache.available_blocks() == 3);  // held by ta: nothing evictable yet
  cache.release(ta);
  CHECK(pool.num_free() == 3);
  CHECK(cache.available_blocks() == 6);
  cache.check_invariants();

  // A new sequence uses the hit: those blocks are shared and stop being evictable.
  BlockTable tb(kBs);
  auto hit = cache.lookup(a, keys, 11);
  REQUIRE(hit.tokens == 8);
  cache.use(hit, tb);
  CHECK(tb.num_tokens() == 8);
  CHECK(pool.refcount(tb.blocks()[0]) == 2);
  CHECK(cache.available_blocks() == 4);  // 3 free + block 2 (a's tail)
  cache.check_invariants();

  // Needing 4 free blocks evicts a's tail block first, nothing that tb holds.
  REQUIRE(cache.make_free(4));
  CHECK(cache.stats().blocks == 2);
  CHECK_FALSE(cache.is_cached(2));
  CHECK(cache.is_cached(0));
  CHECK(cache.is_cached(1));
  CHECK_FALSE(cache.make_free(5));  // the rest are in use
  CHECK(cache.lookup(a, keys, 11).tokens == 8);
  cache.check_invariants();

  cache.release(tb);
  REQUIRE(cache.make_free(6));  // now everything can go, the snapshot with its block
  CHECK(cache.stats().blocks == 0);
  CHECK(cache.stats().snapshots == 0);
  CHECK(cache.lookup(a, keys, 11).tokens == 0);
  CHECK(pool.num_free() == 6);
  cache.check_invariants();
}

TEST_CASE("prefix cache: snapshots are evicted least recently used first", "[prefix_cache]") {
  BlockPool pool(16, kBs);
  PrefixCache cache(pool, 10, 2);
  std::vector<std::vector<int32_t>> prompts = {seq(0, 4), seq(100, 4), seq(200, 4)};
  std::vector<BlockTable> tables;
  for (const auto& p : prompts) {
    tables.push_back(computed(pool, p));
    cache.insert(tables.back(), p, prefix_keys(p, kBs), 4);
  }
  REQUIRE(cache.add_snapshot(prompts[0], prefix_keys(prompts[0], kBs), 4));
  REQUIRE(cache.add_snapshot(prompts[1], prefix_keys(prompts[1], kBs), 4));
  // Using prompt 0's snapshot makes prompt 1's the oldest: the third snapshot takes its slot.
  BlockTable user(kBs);
  cache.use(cache.lookup(prompts[0], prefix_keys(prompts[0], kBs), 4), user);
  REQUIRE(cache.add_snapshot(prompts[2], prefix_keys(prompts[2], kBs), 4));
  CHECK(cache.has_snapshot(prompts[0], prefix_keys(prompts[0], kBs), 4));
  CHECK_FALSE(cache.has_snapshot(prompts[1], prefix_keys(prompts[1], kBs), 4));
  CHECK(cache.has_snapshot(prompts[2], prefix_keys(prompts[2], kBs), 4));
  CHECK(cache.stats().evicted_snapshots_total == 1);
  cache.check_invariants();
  cache.release(user);
  for (auto& t : tables) cache.release(t);
  cache.clear();
  CHECK(pool.num_free() == 16);
}

TEST_CASE("prefix cache: a snapshot superseded on its chain after one hit is evicted first; a shared one is not",
          "[prefix_cache]") {
  for (int32_t hits : {1, 2}) {
    INFO(hits << " hit(s) on the first turn's snapshot");
    BlockPool pool(32, kBs);
    PrefixCache cache(pool, 10, 3);
    // A conversation: turn 1's prompt (8 tokens), turn 2's extends it (12); an older, unrelated
    // prompt; then a new prompt that needs a snapshot slot.
    const auto turn1 = seq(0, 8), other = seq(100, 4), fresh = seq(200, 4);
    auto turn2 = turn1;
    for (int32_t t : seq(50, 4)) turn2.push_back(t);
    std::vector<BlockTable> tables;
    for (const auto& p : {other, turn2, fresh}) {
      tables.push_back(computed(pool, p));
      cache.insert(tables.back(), p, prefix_keys(p, kBs), static_cast<int64_t>(p.size()));
    }
    REQUIRE(cache.add_snapshot(other, prefix_keys(other, kBs), 4));
    REQUIRE(cache.add_snapshot(turn1, prefix_keys(turn1, kBs), 8));
    std::vector<BlockTable> users;
    for (int32_t h = 0; h < hits; ++h) {
      users.emplace_back(kBs);
      const PrefixHit hit = cache.lookup(turn2, prefix_keys(turn2, kBs), 11);
      REQUIRE(hit.tokens == 8);
      cache.use(hit, users.back());
    }
    REQUIRE(cache.add_snapshot(turn2, prefix_keys(turn2, kBs), 12));  // supersedes turn 1's
    REQUIRE(cache.add_snapshot(fresh, prefix_keys(fresh, kBs), 4));  // one must go
    // One hit: turn 1's snapshot goes although `other` is older. Two (a shared prefix): LRU.
    CHECK(cache.has_snapshot(turn1, prefix_keys(turn1, kBs), 8) == (hits > 1));
    CHECK(cache.has_snapshot(other, prefix_keys(other, kBs), 4) == (hits == 1));
    CHECK(cache.has_snapshot(turn2, prefix_keys(turn2, kBs), 12));
    cache.check_invariants();
    for (auto& u : users) cache.release(u);
    for (auto& t : tables) cache.release(t);
    cache.clear();
    CHECK(pool.num_free() == 32);
  }
}

TEST_CASE("prefix cache: a block whose cached parent was evicted is relinked to its own chain", "[prefix_cache]") {
  BlockPool pool(8, kBs);
  PrefixCache cache(pool, 10, 2);
  const auto a = seq(0, 4);   // one block
  const auto y = seq(0, 8);   // the same block, then another
  const auto ky = prefix_keys(y, kBs);
  {
    BlockTable t = computed(pool, a);
    cache.insert(t, a, prefix_keys(a, kBs), 4);
    cache.release(t);  // a's block: cached, evictable
  }
  // y computed its own two blocks; recording them links y's second block under a's block.
  BlockTable ty = computed(pool, y);
  cache.insert(ty, y, ky, 8);
  CHECK(cache.stats().blocks == 2);
  // a's block goes; y's second block is now unreachable through the cache.
  REQUIRE(cache.make_free(pool.num_free() + 1));
  CHECK_FALSE(cache.has_snapshot(y, ky, 8));
  CHECK(cache.lookup(y, ky, 8).matched_tokens == 0);
  // y records its blocks again (at its end): its first block joins, its second is relinked.
  cache.insert(ty, y, ky, 8);
  REQUIRE(cache.add_snapshot(y, ky, 8));
  CHECK(cache.lookup(y, ky, 8).tokens == 8);
  cache.check_invariants();
  cache.release(ty);
  cache.clear();
  CHECK(pool.num_free() == 8);
}

TEST_CASE("prefix cache: randomized use keeps the books balanced", "[prefix_cache]") {
  std::mt19937 rng(12345);
  BlockPool pool(40, kBs);
  PrefixCache cache(pool, 1000, 5);
  struct Live {
    BlockTable table{kBs};
    std::vector<int32_t> tokens;
  };
  std::vector<Live> live;
  // Prompts from a few shared stems, so hits happen.
  auto make_prompt = [&] {
    std::vector<int32_t> p = seq(static_cast<int32_t>(rng() % 3) * 100, static_cast<int32_t>(rng() % 12));
    const int extra = static_cast<int>(rng() % 10) + 1;
    for (int i = 0; i < extra; ++i) p.push_back(static_cast<int32_t>(rng() % 5));
    return p;
  };
  int64_t hits = 0;
  for (int step = 0; step < 3000; ++step) {
    const int op = static_cast<int>(rng() % 3);
    if (op == 0 || live.empty()) {
      Live l;
      l.tokens = make_prompt();
      const auto keys = prefix_keys(l.tokens, kBs);
      auto hit = cache.lookup(l.tokens, keys, static_cast<int64_t>(l.tokens.size()) - 1);
      const int64_t rest = static_cast<int64_t>(l.tokens.size()) - hit.tokens;
      const int32_t need = static_cast<int32_t>((rest + kBs - 1) / kBs);
      cache.use(hit, l.table);
      if (!cache.make_free(need)) {
        cache.release(l.table);
        cache.check_invariants();
        continue;
      }
      hits += hit.tokens;
      auto r = pool.reserve(need);
      REQUIRE(r);
      pool.commit(*r, l.table);
      l.table.append_tokens(rest);
      const int64_t point = (static_cast<int64_t>(l.tokens.size()) - 1) / kBs * kBs;
      cache.insert(l.table, l.tokens, keys, point);
      if (point > 0 && rng() % 2) cache.add_snapshot(l.tokens, keys, point);
      live.push_back(std::move(l));
    } else {
      const size_t i = rng() % live.size();
      Live& l = live[i];
      if (op == 1) cache.insert(l.table, l.tokens, prefix_keys(l.tokens, kBs), l.table.num_tokens());
      cache.release(l.table);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    cache.check_invariants();
    // Every block is free, or held by live tables and/or the cache, with matching counts.
    int32_t held = 0;
    std::vector<int32_t> refs(40, 0);
    for (const auto& l : live)
      for (const auto& h : l.table.blocks()) ++refs[static_cast<size_t>(h.id)];
    for (int32_t id = 0; id < 40; ++id) {
      const int32_t expect = refs[static_cast<size_t>(id)] + (cache.is_cached(id) ? 1 : 0);
      if (expect > 0) ++held;
    }
    REQUIRE(held == pool.num_used());
  }
  CHECK(hits > 0);
  for (auto& l : live) cache.release(l.table);
  cache.clear();
  CHECK(pool.num_free() == 40);
  cache.check_invariants();
}
