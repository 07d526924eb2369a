// KvPoolLayout 64-bit offsets and size_pools capacity accounting.
#include <catch2/catch.hpp>

#include <cstdint>

#include "kvcache/capacity.h"
#include "kvcache/kv_layout.h"

using namespace ds;
using namespace ds::kvcache;

TEST_CASE("pool offsets past 2^32 elements are exact", "[kv_layout]") {
  // 131,073 blocks of [32, 8, 128] f16: 4,295,098,368 elements, just past 2^32.
  KvPoolLayout l{131073, 32, 8, 128, DType::f16};
  l.validate();
  CHECK(l.elements() == 131073LL * 32 * 8 * 128);
  CHECK(l.elements() > (int64_t{1} << 32));
  CHECK(l.bytes() == l.elements() * 2);
  const int64_t last = l.element_offset(131072, 31, 7, 127);
  CHECK(last == l.elements() - 1);
  CHECK(l.element_offset(131072, 0, 0) == 131072LL * 32 * 8 * 128);
  // What 32-bit arithmetic would have produced is different: the test would catch it.
  const uint32_t wrapped = static_cast<uint32_t>(131072u * 32u * 8u * 128u);
  CHECK(static_cast<int64_t>(wrapped) != l.element_offset(131072, 0, 0));
  CHECK(l.byte_offset(131072, 31, 7) == (l.elements() - 128) * 2);
  CHECK(l.byte_offset(TokenSlot{131072, 31}, 7) == l.byte_offset(131072, 31, 7));
}

TEST_CASE("quantised pool rows", "[kv_layout]") {
  KvPoolLayout q8{10, 16, 4, 256, DType::q8_0};
  q8.validate();
  CHECK(q8.row_bytes() == 8 * 34);
  CHECK(q8.byte_offset(3, 5, 2) == ((3 * 16 + 5) * 4 + 2) * 8 * 34);
  KvPoolLayout q4{10, 16, 4, 256, DType::q4_0};
  CHECK(q4.row_bytes() == 8 * 18);
  CHECK(q4.block_bytes() == 16 * 4 * 8 * 18);
  KvPoolLayout bad{10, 16, 4, 100, DType::q4_0};
  CHECK_THROWS_AS(bad.validate(), std::invalid_argument);
  KvPoolLayout zero{0, 16, 4, 128, DType::bf16};
  CHECK_THROWS_AS(zero.validate(), std::invalid_argument);
}

namespace {
// Qwen3.5-9B: 8 full-attention layers (4 KV heads, head_dim 256) and 24 DeltaNet layers.
CacheGeometry qwen35_9b(DType kv) {
  CacheGeometry g;
  g.n_attention_layers = 8;
  g.n_kv_heads = 4;
  g.head_dim = 256;
  g.k_dtype = kv;
  g.v_dtype = kv;
  g.state = StateLayout{24, 2 * 16 * 128 + 32 * 128, 3, 32, 128, 128};
  return g;
}
}  // namespace

TEST_CASE("bytes per token and per slot follow the model", "[capacity]") {
  const CacheGeometry g = qwen35_9b(DType::bf16);
  CHECK(g.kv_bytes_per_token() == 32768);
  CHECK(qwen35_9b(DType::f32).kv_bytes_per_token() == 65536);  // the spec's fp32 figure
  CHECK(qwen35_9b(DType::q8_0).kv_bytes_per_token() == 8 * 4 * 2 * 8 * 34);
  CHECK(g.kv_bytes_per_block(16) == 16 * 32768);
  CHECK(g.state_bytes_per_slot() == 4LL * 24 * (8192 * 3 + 32 * 128 * 128));
  const KvPoolLayout k = g.k_layout(100, 16);
  CHECK(k.bytes() * 2 * g.n_attention_layers == 100 * g.kv_bytes_per_block(16));
}

namespace {
PoolSizes budget(const CacheGeometry& g, int64_t bytes, int32_t block_size, int32_t max_seqs, int64_t reserve = 0) {
  PoolRequest r;
  r.block_size = block_size;
  r.max_num_seqs = max_seqs;
  r.budget_bytes = bytes;
  r.reserve_tokens = reserve;
  return size_pools(g, r);
}
}  // namespace

TEST_CASE("size_pools splits the budget", "[capacity]") {
  const CacheGeometry g = qwen35_9b(DType::bf16);
  const int64_t gib = int64_t{1} << 30;
  const PoolSizes s = budget(g, 40 * gib, 16, 64);
  CHECK(s.num_slots == 64);
  CHECK(s.state_bytes == 64 * g.state_bytes_per_slot());
  CHECK(s.num_blocks == (40 * gib - s.state_bytes) / g.kv_bytes_per_block(16));
  CHECK(s.kv_bytes + s.state_bytes <= 40 * gib);
  CHECK(40 * gib - (s.kv_bytes + s.state_bytes) < g.kv_bytes_per_block(16));
  CHECK(s.token_capacity() == int64_t{s.num_blocks} * 16);
  CHECK_FALSE(s.describe().empty());

  // A small budget caps the slots at half of it.
  const PoolSizes small = budget(g, 2 * gib, 16, 256);
  CHECK(small.num_slots == gib / g.state_bytes_per_slot());
  CHECK(small.num_blocks > 0);

  // Too small for one slot: a clear error.
  CHECK_THROWS_AS(budget(g, g.state_bytes_per_slot(), 16, 4), std::invalid_argument);
  CHECK_THROWS_AS(size_pools(g, PoolRequest{}), std::invalid_argument);  // no budget, no counts
  CHECK_THROWS_AS(budget(g, gib, 0, 4), std::invalid_argument);
}

TEST_CASE("size_pools reserves whole contexts for the contiguous baseline", "[capacity]") {
  const CacheGeometry g = qwen35_9b(DType::bf16);
  const int64_t gib = int64_t{1} << 30;
  const int64_t per_seq = 2048 / 16 * g.kv_bytes_per_block(16) + g.state_bytes_per_slot();
  const PoolSizes s = budget(g, 4 * gib, 16, 256, 2048);
  CHECK(s.num_slots == 4 * gib / per_seq);
  CHECK(s.num_blocks == s.num_slots * (2048 / 16));
  CHECK(s.kv_bytes + s.state_bytes <= 4 * gib);
  CHECK(budget(g, 4 * gib, 16, 2, 2048).num_slots == 2);  // max_num_seqs caps it
  CHECK_THROWS_WITH(budget(g, per_seq - 1, 16, 4, 2048), Catch::Matchers::Contains("cannot hold one contiguous sequence"));
}

TEST_CASE("size_pools takes explicit counts without a budget", "[capacity]") {
  const CacheGeometry g = qwen35_9b(DType::bf16);
  PoolRequest r;
  r.block_size = 32;
  r.max_num_seqs = 6;
  r.num_blocks = 100;
  PoolSizes s = size_pools(g, r);
  CHECK(s.num_blocks == 100);
  CHECK(s.num_slots == 6);
  CHECK(s.kv_bytes == 100 * g.kv_bytes_per_block(32));
  r.num_slots = 3;
  CHECK(size_pools(g, r).num_slots == 3);
}

TEST_CASE("size_pools gives speculating sequences a state slot per drafted token", "[capacity]") {
  const CacheGeometry g = qwen35_9b(DType::bf16);
  const int64_t gib = int64_t{1} << 30;
  PoolRequest r;
  r.block_size = 16;
  r.max_num_seqs = 8;
  r.states_per_seq = 4;  // K = 3
  r.budget_bytes = 40 * gib;
  const PoolSizes s = size_pools(g, r);
  CHECK(s.num_slots == 32);
  CHECK(s.num_blocks == (40 * gib - 32 * g.state_bytes_per_slot()) / g.kv_bytes_per_block(16));
  r.max_num_seqs = 256;  // capped at half the budget, as without speculation
  CHECK(size_pools(g, r).num_slots == 20 * gib / g.state_bytes_per_slot());
  // The contiguous baseline: whole sequences, each with its slots.
  r.max_num_seqs = 256;
  r.reserve_tokens = 2048;
  const int64_t per_seq = 2048 / 16 * g.kv_bytes_per_block(16) + 4 * g.state_bytes_per_slot();
  const PoolSizes c = size_pools(g, r);
  CHECK(c.num_slots == 4 * (40 * gib / per_seq));
  CHECK(c.num_blocks == c.num_slots / 4 * (2048 / 16));
  // Explicit counts.
  PoolRequest e;
  e.max_num_seqs = 6;
  e.states_per_seq = 3;
  e.num_blocks = 10;
  CHECK(size_pools(g, e).num_slots == 18);
  e.states_per_seq = 0;
  CHECK_THROWS_AS(size_pools(g, e), std::invalid_argument);
}
