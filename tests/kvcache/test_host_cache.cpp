// HostCache (the prefix cache's host tier) alone and under a PrefixCache: a block matches
// only with its key, check, parent and tokens; eviction is LRU over unpinned entries; the
// device cache's evictions become host entries and copies, and a lookup continues into the
// host tier and takes the deepest snapshot of either tier.
#include <catch2/catch.hpp>

#include "kvcache/prefix_cache.h"

using namespace ds::kvcache;

namespace {

constexpr int32_t kBs = 4;

std::vector<int32_t> seq(int32_t first, int32_t n) {
  std::vector<int32_t> v;
  for (int32_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

BlockTable computed(BlockPool& pool, const std::vector<int32_t>& tokens) {
  BlockTable t(kBs);
  auto r = pool.reserve(t.blocks_needed(static_cast<int64_t>(tokens.size())));
  REQUIRE(r);
  pool.commit(*r, t);
  t.append_tokens(static_cast<int64_t>(tokens.size()));
  return t;
}

// Key and check of each full block of tokens.
std::vector<std::pair<PrefixKey, PrefixKey>> chain(const std::vector<int32_t>& tokens) {
  std::vector<std::pair<PrefixKey, PrefixKey>> out;
  PrefixKey k = 0, c = 0;
  for (size_t i = 0; i + kBs <= tokens.size(); i += kBs) {
    std::span<const int32_t> b(tokens.data() + i, kBs);
    k = chain_key(k, b);
    c = check_key(c, b);
    out.emplace_back(k, c);
  }
  return out;
}

}  // namespace

TEST_CASE("host cache: sizes from a budget", "[host_cache]") {
  const auto s = HostTierSizes::from_budget(800, 10, 10);
  CHECK(s.snapshots == 10);  // an eighth
  CHECK(s.blocks == 70);
  CHECK(HostTierSizes::from_budget(15, 10, 10).blocks == 0);  // not one of each
  CHECK(HostTierSizes::from_budget(25, 10, 10).snapshots == 1);
  CHECK(HostTierSizes::from_budget(25, 10, 10).blocks == 1);
  CHECK(HostTierSizes::from_budget(0, 10, 10).blocks == 0);
}

TEST_CASE("host cache: a block matches only with its key, check, parent and tokens", "[host_cache]") {
  HostCache h(4, 2, kBs);
  const auto t = seq(0, 8);
  const auto c = chain(t);
  std::span<const int32_t> b0(t.data(), kBs), b1(t.data() + kBs, kBs);
  const auto id0 = h.store_block(c[0].first, c[0].second, 0, b0);
  const auto id1 = h.store_block(c[1].first, c[1].second, c[0].first, b1);
  REQUIRE(id0);
  REQUIRE(id1);
  CHECK(*id0 != *id1);
  CHECK(h.find_block(c[1].first, c[1].second, c[0].first, b1) == *id1);
  CHECK(h.find_block(c[1].first, c[1].second ^ 1, c[0].first, b1) == -1);  // another prefix's check
  CHECK(h.find_block(c[1].first, c[1].second, 12345, b1) == -1);          // another parent
  const auto other = seq(50, kBs);
  CHECK(h.find_block(c[1].first, c[1].second, c[0].first, other) == -1);  // other tokens
  // The same content again costs no copy; other content under a taken key is not stored.
  CHECK_FALSE(h.store_block(c[1].first, c[1].second, c[0].first, b1));
  CHECK_FALSE(h.store_block(c[1].first, c[1].second ^ 1, c[0].first, other));
  CHECK(h.find_block(c[1].first, c[1].second, c[0].first, b1) == *id1);
  h.check_invariants();
}

TEST_CASE("host cache: least recently used first, never a pinned entry", "[host_cache]") {
  HostCache h(2, 1, kBs);
  const auto t = seq(0, 12);
  const auto c = chain(t);
  auto block = [&](size_t i) { return std::span<const int32_t>(t.data() + i * kBs, kBs); };
  const auto a = h.store_block(c[0].first, c[0].second, 0, block(0));
  const auto b = h.store_block(c[1].first, c[1].second, c[0].first, block(1));
  REQUIRE((a && b));
  // a is used again (stored again): b is now the least recently used.
  CHECK_FALSE(h.store_block(c[0].first, c[0].second, 0, block(0)));
  const auto d = h.store_block(c[2].first, c[2].second, c[1].first, block(2));
  REQUIRE(d);
  CHECK(*d == *b);
  CHECK(h.find_block(c[1].first, c[1].second, c[0].first, block(1)) == -1);
  CHECK(h.find_block(c[0].first, c[0].second, 0, block(0)) == *a);
  // Both pinned: nothing can be stored; unpinned, the store evicts again.
  const std::vector<HostBlockId> both{*a, *d};
  h.pin(both, -1);
  CHECK(h.stats().pinned_blocks == 2);
  CHECK_FALSE(h.store_block(c[1].first, c[1].second, c[0].first, block(1)));
  h.check_invariants();
  h.unpin(both, -1);
  CHECK(h.stats().pinned_blocks == 0);
  CHECK(h.store_block(c[1].first, c[1].second, c[0].first, block(1)));
  CHECK(h.stats().evicted_blocks_total == 2);
  // Snapshots likewise.
  const auto s0 = h.store_snapshot(c[0].first, c[0].second);
  REQUIRE(s0);
  CHECK(h.find_snapshot(c[0].first, c[0].second) == *s0);
  CHECK(h.find_snapshot(c[0].first, c[0].second ^ 1) == -1);
  h.pin({}, *s0);
  CHECK_FALSE(h.store_snapshot(c[1].first, c[1].second));
  h.unpin({}, *s0);
  CHECK(h.store_snapshot(c[1].first, c[1].second));
  CHECK(h.find_snapshot(c[0].first, c[0].second) == -1);
  h.check_invariants();
}

TEST_CASE("host cache: device evictions go to the host and a lookup continues there", "[host_cache]") {
  BlockPool pool(6, kBs);
  HostCache host(16, 4, kBs);
  PrefixCache cache(pool, 100, 2, &host);
  const auto a = seq(0, 17);  // 4 full blocks + 1 token
  const auto keys = prefix_keys(a, kBs);
  BlockTable ta = computed(pool, a);
  cache.insert(ta, a, keys, 16);
  const auto snap = cache.add_snapshot(a, keys, 16);
  REQUIRE(snap);
  cache.release(ta);
  // Before its state is copied in, an evicted snapshot would carry nothing to the host.
  {
    BlockPool pool2(6, kBs);
    HostCache host2(16, 4, kBs);
    PrefixCache early(pool2, 100, 1, &host2);
    BlockTable t2 = computed(pool2, a);
    early.insert(t2, a, keys, 16);
    REQUIRE(early.add_snapshot(a, keys, 8));
    REQUIRE(early.add_snapshot(a, keys, 16));  // evicts the one at 8, not saved yet
    CHECK(early.take_offloads().states.empty());
    early.snapshots_saved();
    early.release(t2);
    REQUIRE(early.make_free(6));
    CHECK(early.take_offloads().states.size() == 1);  // the one at 16, saved
  }
  cache.snapshots_saved();
  CHECK(cache.take_offloads().empty());  // nothing evicted yet

  // Everything evicted: the blocks (deepest first) and the snapshot go to the host.
  REQUIRE(cache.make_free(6));
  const Offloads o = cache.take_offloads();
  CHECK(o.blocks.size() == 4);
  REQUIRE(o.states.size() == 1);
  CHECK(o.states[0].device == *snap);
  CHECK(host.stats().blocks == 4);
  CHECK(host.stats().snapshots == 1);

  const PrefixHit hit = cache.lookup(a, keys, 16);
  CHECK(hit.blocks.empty());
  CHECK(hit.snapshot == -1);
  CHECK(hit.host_blocks.size() == 4);
  CHECK(hit.host_snapshot == host.find_snapshot(keys[3], chain(a)[3].second));
  CHECK(hit.tokens == 16);
  CHECK(hit.from_host());
  // The host blocks are those the offloads filled, in chain order.
  for (size_t i = 0; i < 4; ++i) {
    bool found = false;
    for (const BlockTransfer& t : o.blocks) found |= t.host == hit.host_blocks[i];
    CHECK(found);
  }
  // A prompt that parts after two blocks hits no snapshot there: no hit, two blocks matched.
  auto b = seq(0, 8);
  b.push_back(99);
  b.insert(b.end(), {1, 2, 3, 4});
  const PrefixHit partial = cache.lookup(b, prefix_keys(b, kBs), 12);
  CHECK(partial.tokens == 0);
  CHECK(partial.matched_tokens == 8);

  // A device snapshot at the same depth wins; a deeper host one is taken over a shallower device one.
  BlockTable ta2 = computed(pool, a);
  cache.insert(ta2, a, keys, 16);
  REQUIRE(cache.add_snapshot(a, keys, 8));
  const PrefixHit mixed = cache.lookup(a, keys, 16);
  CHECK(mixed.blocks.size() == 4);  // every block on the device again
  CHECK(mixed.host_blocks.empty());
  CHECK(mixed.snapshot == -1);
  CHECK(mixed.host_snapshot >= 0);  // the host's at 16, deeper than the device's at 8
  CHECK(mixed.tokens == 16);
  cache.release(ta2);
  cache.check_invariants();
  cache.clear();
  CHECK(cache.take_offloads().empty());  // clearing moves nothing to the host
}
