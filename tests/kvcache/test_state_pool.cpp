// StatePool: acquire zeroes, release frees, stale handles are refused.
#include <catch2/catch.hpp>

#include <vector>

#include "kvcache/state_pool.h"

using namespace ds::kvcache;

namespace {
StateLayout tiny_layout() {
  StateLayout l;
  l.n_layers = 2;
  l.conv_dim = 6;
  l.conv_taps = 3;
  l.value_heads = 2;
  l.key_dim = 4;
  l.value_dim = 4;
  return l;
}
}  // namespace

TEST_CASE("state layout sizes and offsets", "[state_pool]") {
  const StateLayout l = tiny_layout();
  CHECK(l.conv_elements_per_layer() == 18);
  CHECK(l.recurrent_elements_per_layer() == 32);
  CHECK(l.bytes_per_slot() == 4 * 2 * (18 + 32));
  CHECK(l.conv_offset(0, 1) == 18);
  CHECK(l.conv_offset(3, 1) == (3 * 2 + 1) * 18);
  CHECK(l.recurrent_offset(2, 0) == 4 * 32);

  // Qwen3.5-27B: 48 DeltaNet layers, 48 value heads of 128x128, 10240 conv channels.
  StateLayout big{48, 10240, 3, 48, 128, 128};
  CHECK(big.recurrent_elements_per_slot() == 48LL * 48 * 128 * 128);
  CHECK(big.bytes_per_slot() == 4LL * (48LL * 10240 * 3 + 48LL * 48 * 128 * 128));
  // A bf16 recurrent state (--mamba-ssm-cache-dtype bfloat16) halves its part only.
  big.recurrent_dtype = ds::DType::bf16;
  CHECK(big.bytes_per_slot() == 4LL * 48 * 10240 * 3 + 2LL * 48 * 48 * 128 * 128);
  // Slot offsets far past 2^32 elements stay exact.
  CHECK(big.recurrent_offset(20000, 47) == (20000LL * 48 + 47) * 48 * 128 * 128);
}

TEST_CASE("acquire zeroes the slot, through the backend's callback", "[state_pool]") {
  const StateLayout l = tiny_layout();
  const int slots = 3;
  std::vector<float> recurrent(static_cast<size_t>(slots * l.recurrent_elements_per_slot()), 7.f);
  std::vector<int> zeroed;
  StatePool pool(slots, l, [&](SlotId id) {
    zeroed.push_back(id);
    auto* p = recurrent.data() + l.recurrent_offset(id, 0);
    std::fill(p, p + l.recurrent_elements_per_slot(), 0.f);
  });
  auto a = pool.acquire();
  REQUIRE(a);
  CHECK(zeroed == std::vector<int>{a->id});
  for (int64_t i = 0; i < l.recurrent_elements_per_slot(); ++i)
    REQUIRE(recurrent[static_cast<size_t>(l.recurrent_offset(a->id, 0) + i)] == 0.f);
  // Dirty it, release, and the next tenant of that slot still starts from zero.
  recurrent[static_cast<size_t>(l.recurrent_offset(a->id, 1))] = 3.f;
  pool.release(*a);
  auto b = pool.acquire();
  REQUIRE(b);
  CHECK(b->id == a->id);
  CHECK(recurrent[static_cast<size_t>(l.recurrent_offset(b->id, 1))] == 0.f);
  // reset zeroes a live slot again.
  recurrent[static_cast<size_t>(l.recurrent_offset(b->id, 0))] = 5.f;
  pool.reset(*b);
  CHECK(recurrent[static_cast<size_t>(l.recurrent_offset(b->id, 0))] == 0.f);
}

TEST_CASE("state pool exhaustion, stale and double release", "[state_pool]") {
  StatePool pool(2, tiny_layout());
  auto a = pool.acquire();
  auto b = pool.acquire();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->id != b->id);
  CHECK(pool.num_free() == 0);
  CHECK_FALSE(pool.acquire());
  pool.release(*a);
  CHECK_THROWS_AS(pool.release(*a), StaleHandleError);
  auto c = pool.acquire();
  REQUIRE(c);
  CHECK(c->id == a->id);
  CHECK_FALSE(pool.is_live(*a));
  CHECK(pool.is_live(*c));
  CHECK_THROWS_AS(pool.release(*a), StaleHandleError);  // reused slot, old handle
  CHECK_THROWS_AS(pool.reset(*a), StaleHandleError);
  CHECK_THROWS_AS(pool.release(SlotHandle{9, 0}), StaleHandleError);
  pool.release(*b);
  pool.release(*c);
  CHECK(pool.num_free() == 2);
  CHECK_THROWS_AS(StatePool(0, tiny_layout()), std::invalid_argument);
}

TEST_CASE("a throwing zero callback leaves the slot free", "[state_pool]") {
  bool fail = true;
  StatePool pool(1, tiny_layout(), [&](SlotId) {
    if (fail) throw std::runtime_error("device fault");
  });
  CHECK_THROWS_AS(pool.acquire(), std::runtime_error);
  CHECK(pool.num_free() == 1);
  fail = false;
  CHECK(pool.acquire());
}
