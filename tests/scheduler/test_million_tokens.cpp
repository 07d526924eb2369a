// 1M-token contexts (issue 48) at the sizes they really have, without the memory: the pool
// arithmetic of the 9B's geometry on one H200 (a 1M-token sequence is 65,536 blocks and its
// K/V reaches past 2^31 bytes of one layer's pool), a forward batch whose decode row sits at
// position 1,048,575, and the engine on the checking FakeModel running a 1,048,576-token
// context end to end -- chunked prefill, decode, and a prefix-cache hit of ~1M tokens whose
// chain keys, shared blocks and snapshot the fake verifies on every step.
#include <catch2/catch.hpp>

#include <random>

#include "engine_checks.h"
#include "fake_model.h"
#include "kernels/batch_plan.h"
#include "kvcache/block_pool.h"
#include "kvcache/capacity.h"
#include "kvcache/prefix_key.h"
#include "scheduler/engine.h"

using namespace ds;
using namespace ds::scheduler;
using ds::test::collect;
using ds::test::FakeModel;

namespace {

constexpr int64_t kMillion = int64_t{1} << 20;  // 1,048,576 tokens

// The 9B's caches: 8 full-attention layers of 4 KV heads x 256 (bf16), 24 DeltaNet layers of
// 32 value heads x 128 x 128 (f32 state) and the conv state.
kvcache::CacheGeometry nine_b() {
  kvcache::CacheGeometry g;
  g.n_attention_layers = 8;
  g.n_kv_heads = 4;
  g.head_dim = 256;
  g.k_dtype = g.v_dtype = DType::bf16;
  g.state.n_layers = 24;
  g.state.conv_dim = 2 * 16 * 128 + 32 * 128;
  g.state.conv_taps = 3;
  g.state.value_heads = 32;
  g.state.key_dim = 128;
  g.state.value_dim = 128;
  g.state.conv_dtype = DType::f32;
  g.state.recurrent_dtype = DType::f32;
  return g;
}

}  // namespace

TEST_CASE("1M tokens: the 9B's pools on one H200, and a 1M-token table", "[million]") {
  const kvcache::CacheGeometry g = nine_b();
  CHECK(g.kv_bytes_per_token() == 32768);  // 32 KiB: 1M tokens are 32 GiB of K/V
  // What serve's budget leaves on an H200 at --gpu-memory-utilization 0.9 (~100 GiB): enough
  // for 1M tokens of bf16 K/V several times over.
  const kvcache::PoolSizes s = kvcache::size_pools(
      g, {.block_size = 16, .max_num_seqs = 8, .budget_bytes = int64_t{100} << 30});
  CHECK(s.token_capacity() >= 3 * kMillion);
  CHECK(s.kv_bytes == static_cast<int64_t>(s.num_blocks) * 16 * g.kv_bytes_per_token());
  // One layer's K pool past 2^31 bytes: offsets of the last block are 64-bit and exact.
  const kvcache::KvPoolLayout k = g.k_layout(s.num_blocks, 16);
  CHECK(k.bytes() > (int64_t{1} << 32));
  const int64_t last = s.num_blocks - 1;
  CHECK(k.byte_offset(last, 15, 3) == ((last * 16 + 15) * 4 + 3) * 512);
  CHECK(k.byte_offset(last, 15, 3) + k.row_bytes() == k.bytes());

  // A 1M-token sequence's table: 65,536 blocks from a pool of 70,000 (bookkeeping only).
  kvcache::BlockPool pool(70000, 16);
  kvcache::BlockTable t(16);
  auto r = pool.reserve(t.blocks_needed(kMillion));
  REQUIRE(r);
  CHECK(r->size() == 65536);
  pool.commit(*r, t);
  t.append_tokens(kMillion);
  CHECK(t.num_tokens() == kMillion);
  const kvcache::TokenSlot slot = t.locate(kMillion - 1);
  CHECK(slot.block == t.block_ids()[65535]);
  CHECK(slot.offset == 15);
  CHECK_THROWS(t.locate(kMillion));

  // A step whose decode row is the 1,048,576th token: its position and K/V slot as planned.
  kernels::SequenceChunk c;
  c.n_tokens = 1;
  c.n_cached = kMillion - 1;
  c.state_slot = 0;
  c.block_ids = t.block_ids();
  const int32_t token = 5;
  kernels::BatchDesc d;
  d.token_ids = std::span<const int32_t>(&token, 1);
  d.seqs = std::span<const kernels::SequenceChunk>(&c, 1);
  d.block_size = 16;
  d.num_blocks = 70000;
  d.num_slots = 1;
  d.vocab_size = 248320;
  const kernels::BatchPlan plan(d);
  REQUIRE(plan.num_rows() == 1);
  CHECK(plan.positions()[0] == kMillion - 1);
  CHECK(plan.kv_slots()[0] == static_cast<int64_t>(slot.block) * 16 + 15);
  pool.free_table(t);
  CHECK(pool.num_free() == 70000);

  // Prefix keys over 1M tokens: a chain of 65,536 block keys, and one changed token at the end
  // changes only the last.
  std::vector<int32_t> tokens(static_cast<size_t>(kMillion));
  std::mt19937 rng(1);
  for (auto& x : tokens) x = static_cast<int32_t>(rng() % 248320);
  kvcache::PrefixKey k1 = 0, k2 = 0, k1_prev = 0;
  for (size_t b = 0; b < 65536; ++b) {
    const auto span = std::span<const int32_t>(tokens).subspan(b * 16, 16);
    k1_prev = k1;
    k1 = kvcache::chain_key(k1, span);
  }
  tokens.back() ^= 1;
  for (size_t b = 0; b < 65536; ++b) k2 = kvcache::chain_key(k2, std::span<const int32_t>(tokens).subspan(b * 16, 16));
  CHECK(k1 != k2);
  CHECK(kvcache::chain_key(k1_prev, std::span<const int32_t>(tokens).subspan(65535 * 16, 16)) == k2);
}

TEST_CASE("1M tokens: the engine runs a 1M-token context and hits it in the prefix cache", "[million]") {
  const int32_t vocab = 4096;
  FakeModel model(vocab);
  EngineConfig c = ds::test::fake_engine_config(67000, 16, 2, 65536);
  c.max_ctx = kMillion;
  c.prefix_caching = true;
  c.num_snapshots = 4;
  Engine engine(model, c, kernels::cpu::make_cpu_sampler());
  REQUIRE(engine.max_ctx() == kMillion);

  std::mt19937 rng(9);
  std::vector<int32_t> prompt(static_cast<size_t>(kMillion - 8));
  for (auto& x : prompt) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  Request r(prompt);
  r.max_tokens = 8;  // to exactly max_ctx
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  r.cache_points = {static_cast<int64_t>(prompt.size()) - 1};
  auto s = engine.submit(r);
  REQUIRE(s.ok());
  const auto out = collect(s.handle, std::chrono::seconds(600));
  REQUIRE(out.finish == FinishReason::length);
  CHECK(out.tokens.size() == 8);
  CHECK(out.tokens == model.reference_tokens(prompt, 8, {}, kMillion, r.sampling, 0));

  // The same prompt again: served from the cache (all but the last partial block).
  Request again(prompt);
  again.max_tokens = 4;
  again.ignore_eos = true;
  again.sampling.temperature = 0;
  auto s2 = engine.submit(again);
  REQUIRE(s2.ok());
  const auto out2 = collect(s2.handle, std::chrono::seconds(600));
  CHECK(out2.tokens == std::vector<int32_t>(out.tokens.begin(), out.tokens.begin() + 4));
  CHECK(out2.last.metrics.cached_tokens >= static_cast<int64_t>(prompt.size()) - 16);
  // A prompt one token longer than max_ctx is refused at submit.
  std::vector<int32_t> too_long(static_cast<size_t>(kMillion + 1), 1);
  CHECK(engine.submit(Request(too_long)).status == SubmitStatus::prompt_too_long);
  // Quiet: every block left is held by the prefix cache alone, every slot is free.
  REQUIRE(ds::test::wait_stats(engine, [](const EngineStats& st) { return st.running == 0 && st.waiting == 0; }));
  const EngineStats st = engine.stats();
  CHECK(st.slots_used == 0);
  CHECK(st.blocks_used == st.prefix_cache_blocks);
  CHECK(st.prefix_cache_blocks >= 65535);
  CHECK(st.invariant_violations == 0);
  CHECK(model.violations() == 0);
}
