// BlockPool and BlockTable: reservation, commit, rollback, refcounts, stale handles.
#include <catch2/catch.hpp>

#include "kvcache/block_pool.h"

using namespace ds::kvcache;

TEST_CASE("a fresh pool is all free", "[block_pool]") {
  BlockPool pool(8, 16);
  CHECK(pool.num_blocks() == 8);
  CHECK(pool.block_size() == 16);
  CHECK(pool.num_free() == 8);
  CHECK(pool.num_used() == 0);
  CHECK_THROWS_AS(BlockPool(0, 16), std::invalid_argument);
  CHECK_THROWS_AS(BlockPool(4, 0), std::invalid_argument);
}

TEST_CASE("reserve is all or nothing", "[block_pool]") {
  BlockPool pool(4, 16);
  auto r = pool.reserve(3);
  REQUIRE(r);
  CHECK(r->size() == 3);
  CHECK(pool.num_free() == 1);
  CHECK(pool.num_reserved() == 3);
  // Asking for more than is free changes nothing.
  CHECK_FALSE(pool.reserve(2));
  CHECK(pool.num_free() == 1);
  CHECK(pool.num_reserved() == 3);
  auto empty = pool.reserve(0);
  REQUIRE(empty);
  CHECK(empty->empty());
  CHECK_THROWS_AS(pool.reserve(-1), std::invalid_argument);
}

TEST_CASE("commit moves reserved blocks into a table, in order", "[block_pool]") {
  BlockPool pool(4, 16);
  BlockTable table(16);
  auto r = pool.reserve(2);
  REQUIRE(r);
  const auto reserved = r->blocks();
  pool.commit(*r, table);
  CHECK(r->empty());
  CHECK(pool.num_reserved() == 0);
  CHECK(pool.num_used() == 2);
  REQUIRE(table.num_blocks() == 2);
  CHECK(table.blocks() == reserved);
  CHECK(table.block_ids() == std::vector<BlockId>{reserved[0].id, reserved[1].id});
  CHECK(table.capacity() == 32);
  for (const auto& h : table.blocks()) {
    CHECK(pool.is_live(h));
    CHECK(pool.refcount(h) == 1);
  }
}

TEST_CASE("rollback returns every block and a dropped reservation rolls back", "[block_pool]") {
  BlockPool pool(4, 16);
  {
    auto r = pool.reserve(3);
    REQUIRE(r);
    r->rollback();
    CHECK(r->empty());
    CHECK(pool.num_free() == 4);
    r->rollback();  // rolling back twice is harmless
    CHECK(pool.num_free() == 4);
  }
  {
    auto r = pool.reserve(4);
    REQUIRE(r);
    CHECK(pool.num_free() == 0);
  }  // destroyed uncommitted
  CHECK(pool.num_free() == 4);
  CHECK(pool.num_reserved() == 0);
}

TEST_CASE("a moved reservation is owned once", "[block_pool]") {
  BlockPool pool(4, 16);
  auto r = pool.reserve(2);
  REQUIRE(r);
  Reservation moved = std::move(*r);
  CHECK(moved.size() == 2);
  CHECK(r->empty());
  r.reset();  // the moved-from one gives nothing back
  CHECK(pool.num_free() == 2);
  Reservation other;
  other = std::move(moved);
  CHECK(pool.num_free() == 2);
  other.rollback();
  CHECK(pool.num_free() == 4);
}

TEST_CASE("a rolled-back reservation's handles are stale", "[block_pool]") {
  BlockPool pool(2, 16);
  auto r = pool.reserve(1);
  REQUIRE(r);
  const BlockHandle h = r->blocks()[0];
  r->rollback();
  CHECK_FALSE(pool.is_live(h));
  CHECK_THROWS_AS(pool.release(h), StaleHandleError);
}

TEST_CASE("freeing a table releases its blocks at once", "[block_pool]") {
  BlockPool pool(4, 8);
  BlockTable table(8);
  auto r = pool.reserve(3);
  pool.commit(*r, table);
  table.append_tokens(20);
  pool.free_table(table);
  CHECK(pool.num_free() == 4);
  CHECK(table.num_blocks() == 0);
  CHECK(table.num_tokens() == 0);
}

TEST_CASE("free_tail gives back the blocks past a table's tokens, never those holding them", "[block_pool]") {
  BlockPool pool(6, 8);
  BlockTable table(8);
  auto r = pool.reserve(4);
  pool.commit(*r, table);
  table.append_tokens(9);  // blocks 0 and 1 hold tokens; 2 and 3 were room for rejected drafts
  const BlockHandle shared = pool.retain(table.blocks()[3]);  // someone else also holds block 3
  CHECK_THROWS_AS(pool.free_tail(table, 1), std::logic_error);
  CHECK(table.num_blocks() == 4);  // refused whole
  pool.free_tail(table, 2);
  CHECK(table.num_blocks() == 2);
  CHECK(table.num_tokens() == 9);
  CHECK(pool.num_free() == 3);  // block 3 keeps its other reference
  CHECK(pool.refcount(shared) == 1);
  pool.free_tail(table, 5);  // nothing past the end
  CHECK(table.num_blocks() == 2);
  pool.release(shared);
  pool.free_table(table);
  CHECK(pool.num_free() == 6);
}

TEST_CASE("stale handles and double frees are refused", "[block_pool]") {
  BlockPool pool(1, 16);
  BlockTable a(16);
  auto r = pool.reserve(1);
  pool.commit(*r, a);
  const BlockHandle old = a.blocks()[0];
  pool.release(old);
  CHECK(pool.num_free() == 1);
  // Double free of the same handle.
  CHECK_THROWS_AS(pool.release(old), StaleHandleError);
  CHECK_THROWS_AS(pool.retain(old), StaleHandleError);
  CHECK_THROWS_AS(pool.refcount(old), StaleHandleError);
  // The block is reused by another sequence: the old handle still must not touch it.
  BlockTable b(16);
  auto r2 = pool.reserve(1);
  pool.commit(*r2, b);
  const BlockHandle fresh = b.blocks()[0];
  CHECK(fresh.id == old.id);
  CHECK(fresh.generation != old.generation);
  CHECK_FALSE(pool.is_live(old));
  CHECK_THROWS_AS(pool.release(old), StaleHandleError);
  CHECK(pool.refcount(fresh) == 1);  // untouched by the refused release
  // Out-of-range ids are refused too.
  CHECK_THROWS_AS(pool.release(BlockHandle{5, 0}), StaleHandleError);
  CHECK_THROWS_AS(pool.release(BlockHandle{-1, 0}), StaleHandleError);
  CHECK_FALSE(pool.is_live(BlockHandle{}));
}

TEST_CASE("a table with a stale block is refused whole by free_table", "[block_pool]") {
  BlockPool pool(3, 16);
  BlockTable t(16);
  auto r = pool.reserve(2);
  pool.commit(*r, t);
  pool.release(t.blocks()[1]);  // freed behind the table's back
  CHECK_THROWS_AS(pool.free_table(t), StaleHandleError);
  CHECK(pool.is_live(t.blocks()[0]));  // nothing changed
  pool.release(t.blocks()[0]);
  CHECK(pool.num_free() == 3);
}

TEST_CASE("refcounts keep shared blocks alive", "[block_pool]") {
  BlockPool pool(2, 16);
  BlockTable a(16);
  auto r = pool.reserve(1);
  pool.commit(*r, a);
  const BlockHandle h = a.blocks()[0];
  CHECK(pool.retain(h) == h);
  CHECK(pool.refcount(h) == 2);
  pool.free_table(a);
  CHECK(pool.is_live(h));
  CHECK(pool.num_free() == 1);
  pool.release(h);
  CHECK_FALSE(pool.is_live(h));
  CHECK(pool.num_free() == 2);
}

TEST_CASE("exhaustion: the last block goes, then nothing", "[block_pool]") {
  BlockPool pool(3, 4);
  BlockTable t(4);
  for (int i = 0; i < 3; ++i) {
    auto r = pool.reserve(1);
    REQUIRE(r);
    pool.commit(*r, t);
  }
  CHECK(pool.num_free() == 0);
  CHECK_FALSE(pool.reserve(1));
  auto none = pool.reserve(0);
  CHECK(none);
  pool.free_table(t);
  CHECK(pool.reserve(3));
}

TEST_CASE("commit refuses a table of another block size", "[block_pool]") {
  BlockPool pool(2, 16);
  BlockTable t(8);
  auto r = pool.reserve(1);
  CHECK_THROWS_AS(pool.commit(*r, t), std::logic_error);
  CHECK(r->size() == 1);  // still reserved, still rolls back
  r->rollback();
  CHECK(pool.num_free() == 2);
}

TEST_CASE("block table positions map to (block, offset)", "[block_table]") {
  BlockPool pool(8, 16);
  BlockTable t(16);
  CHECK(t.blocks_needed(0) == 0);
  CHECK(t.blocks_needed(1) == 1);
  CHECK(t.blocks_needed(16) == 1);
  CHECK(t.blocks_needed(17) == 2);
  auto r = pool.reserve(t.blocks_needed(40));
  REQUIRE(r->size() == 3);
  pool.commit(*r, t);
  CHECK(t.blocks_needed(40) == 0);
  CHECK(t.blocks_needed(49) == 1);
  CHECK_THROWS_AS(t.append_tokens(49), std::out_of_range);
  CHECK(t.num_tokens() == 0);
  t.append_tokens(40);
  CHECK(t.blocks_needed(8) == 0);
  CHECK(t.blocks_needed(9) == 1);
  const auto& ids = t.block_ids();
  CHECK(t.locate(0).block == ids[0]);
  CHECK(t.locate(0).offset == 0);
  CHECK(t.locate(15).block == ids[0]);
  CHECK(t.locate(15).offset == 15);
  CHECK(t.locate(16).block == ids[1]);
  CHECK(t.locate(16).offset == 0);
  CHECK(t.locate(47).block == ids[2]);
  CHECK(t.locate(47).offset == 15);
  CHECK_THROWS_AS(t.locate(48), std::out_of_range);
  CHECK_THROWS_AS(t.locate(-1), std::out_of_range);
  t.truncate_tokens(10);
  CHECK(t.num_tokens() == 10);
  CHECK_THROWS_AS(t.truncate_tokens(11), std::out_of_range);
  CHECK_THROWS_AS(t.append_tokens(-1), std::invalid_argument);
}
