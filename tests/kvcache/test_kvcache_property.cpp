// Randomised property test: thousands of interleaved pool operations checked against a
// plain model of who holds what.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <random>
#include <vector>

#include "kvcache/block_pool.h"
#include "kvcache/state_pool.h"

using namespace ds::kvcache;

namespace {

struct Seq {
  BlockTable table{8};
  std::optional<SlotHandle> slot;
  std::optional<Reservation> pending;
};

// Every block's refcount equals the number of tables that list it; free + reserved +
// allocated = total; no block appears in a table and in the free state at once.
void check_invariants(const BlockPool& pool, const StatePool& slots, const std::map<int, Seq>& seqs) {
  std::map<BlockId, int> refs;
  int reserved = 0;
  for (const auto& [id, s] : seqs) {
    for (const BlockHandle& h : s.table.blocks()) {
      REQUIRE(pool.is_live(h));
      ++refs[h.id];
    }
    if (s.pending) reserved += s.pending->size();
  }
  for (const auto& [id, s] : seqs) {
    for (const BlockHandle& h : s.table.blocks()) REQUIRE(pool.refcount(h) == refs[h.id]);
  }
  REQUIRE(pool.num_reserved() == reserved);
  REQUIRE(pool.num_free() + reserved + static_cast<int>(refs.size()) == pool.num_blocks());
  REQUIRE(pool.num_free() + pool.num_used() == pool.num_blocks());
  int live_slots = 0;
  for (const auto& [id, s] : seqs) {
    if (s.slot) {
      REQUIRE(slots.is_live(*s.slot));
      ++live_slots;
    }
  }
  REQUIRE(slots.num_used() == live_slots);
}

}  // namespace

TEST_CASE("random interleavings keep every invariant and leak nothing", "[kvcache][property]") {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    std::mt19937 rng(seed);
    const int num_blocks = 4 + static_cast<int>(rng() % 60);
    BlockPool pool(num_blocks, 8);
    StatePool slots(1 + static_cast<int>(rng() % 6), StateLayout{1, 4, 3, 1, 2, 2});
    std::map<int, Seq> seqs;
    int next_id = 0;
    std::vector<BlockHandle> dead;  // handles of freed blocks, for stale-use probes
    auto pick = [&]() -> Seq* {
      if (seqs.empty()) return nullptr;
      auto it = seqs.begin();
      std::advance(it, rng() % seqs.size());
      return &it->second;
    };
    for (int step = 0; step < 3000; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op == 0) {  // new sequence, with a state slot if one is free
        Seq& s = seqs[next_id++];
        s.slot = slots.acquire();
      } else if (op == 1 || op == 2) {  // reserve blocks for new tokens
        if (Seq* s = pick(); s && !s->pending) {
          const int64_t n = 1 + static_cast<int64_t>(rng() % 40);
          const int32_t need = s->table.blocks_needed(n);
          const int free_before = pool.num_free();
          auto r = pool.reserve(need);
          if (r) {
            s->pending = std::move(r);
          } else {
            REQUIRE(need > free_before);
            REQUIRE(pool.num_free() == free_before);
          }
        }
      } else if (op == 3 || op == 4) {  // commit, then write tokens
        if (Seq* s = pick(); s && s->pending) {
          pool.commit(*s->pending, s->table);
          s->pending.reset();
          const int64_t room = s->table.capacity() - s->table.num_tokens();
          if (room > 0) s->table.append_tokens(1 + static_cast<int64_t>(rng() % room));
        }
      } else if (op == 5) {  // roll back
        if (Seq* s = pick(); s && s->pending) {
          if (rng() % 2) s->pending->rollback();
          s->pending.reset();  // the destructor rolls back what is left
        }
      } else if (op == 6) {  // prefix sharing: an empty sequence takes another's full blocks
        Seq* a = pick();
        Seq* b = pick();
        if (a && b && a != b && !b->pending && b->table.num_blocks() == 0) {
          const int64_t full = a->table.num_tokens() / 8;
          for (int64_t i = 0; i < full; ++i) pool.share(a->table.blocks()[i], b->table);
          b->table.append_tokens(full * 8);
        }
      } else if (op == 7 || op == 8) {  // finish or cancel a sequence: everything goes back
        if (!seqs.empty()) {
          auto it = seqs.begin();
          std::advance(it, rng() % seqs.size());
          for (const auto& h : it->second.table.blocks()) dead.push_back(h);
          pool.free_table(it->second.table);
          if (it->second.slot) slots.release(*it->second.slot);
          seqs.erase(it);
        }
      } else {  // probe: a stale handle is always refused and changes nothing
        if (!dead.empty()) {
          const BlockHandle h = dead[rng() % dead.size()];
          if (!pool.is_live(h)) {
            const int free_before = pool.num_free();
            REQUIRE_THROWS_AS(pool.release(h), StaleHandleError);
            REQUIRE(pool.num_free() == free_before);
          }
        }
      }
      check_invariants(pool, slots, seqs);
    }
    for (auto& [id, s] : seqs) {
      s.pending.reset();
      pool.free_table(s.table);
      if (s.slot) slots.release(*s.slot);
    }
    seqs.clear();
    CHECK(pool.num_free() == pool.num_blocks());
    CHECK(pool.num_reserved() == 0);
    CHECK(slots.num_free() == slots.num_slots());
  }
}
