// plan_decode (host only): coverage, flags, partial slots, occupancy and balance.
#include <catch2/catch.hpp>

#include <algorithm>
#include <climits>
#include <vector>

#include "kernels/cuda/paged_attention.h"

using namespace ds::cuda;

namespace {

DecodeLaunchConfig h200_bf16() {  // what choose_decode_launch reports for the tensor-core kernel, bf16 K/V, D=256
  DecodeLaunchConfig d;
  d.kernel = DecodeKernel::tensor_core;
  d.sm_count = 132;
  d.ctas_per_sm = 1;
  d.heads_per_cta = 8;
  d.head_chunks = 1;
  d.kv_bytes_per_token = 1024;
  return d;
}

// Every sequence is covered by consecutive chunks, flags and partial slots are consistent.
void check_plan(const DecodePlan& p, const std::vector<int32_t>& lens) {
  REQUIRE(p.n_seqs == static_cast<int32_t>(lens.size()));
  REQUIRE(p.seq_item_begin.size() == lens.size() + 1);
  REQUIRE(p.seq_item_begin.front() == 0);
  REQUIRE(p.seq_item_begin.back() == static_cast<int32_t>(p.items.size()));
  std::vector<std::vector<DecodeWorkItem>> per(lens.size());
  std::vector<int> seen(p.items.size(), 0);
  for (const auto& it : p.items) {
    REQUIRE(it.seq >= 0);
    REQUIRE(it.seq < p.n_seqs);
    per[it.seq].push_back(it);
    REQUIRE(it.partial >= p.seq_item_begin[it.seq]);
    REQUIRE(it.partial < p.seq_item_begin[it.seq + 1]);
    ++seen[it.partial];
  }
  for (int s : seen) REQUIRE(s == 1);
  bool any_split = false;
  for (size_t i = 0; i < lens.size(); ++i) {
    auto& v = per[i];
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.token_begin < b.token_begin; });
    REQUIRE(!v.empty());
    REQUIRE(static_cast<int32_t>(v.size()) == p.seq_item_begin[i + 1] - p.seq_item_begin[i]);
    any_split = any_split || v.size() > 1;
    for (size_t j = 0; j < v.size(); ++j) {
      REQUIRE(v[j].token_begin == static_cast<int64_t>(j) * p.chunk_tokens);
      const bool last = j + 1 == v.size();
      REQUIRE(((v[j].flags & kItemLast) != 0) == last);
      REQUIRE(((v[j].flags & kItemOnly) != 0) == (v.size() == 1));
      // No dead partitions: every chunk but an empty sequence's holds tokens.
      if (lens[i] > 0) REQUIRE(v[j].token_begin < lens[i]);
    }
    if (lens[i] > 0) REQUIRE(static_cast<int64_t>(v.size() - 1) * p.chunk_tokens < lens[i]);
    REQUIRE(static_cast<int64_t>(v.size()) * p.chunk_tokens >= lens[i]);
  }
  REQUIRE(p.needs_merge == any_split);
  // Longest chunks are dispatched first.
  auto tokens = [&](const DecodeWorkItem& it) {
    return std::min<int64_t>(p.chunk_tokens, lens[it.seq] - int64_t{it.token_begin});
  };
  for (size_t i = 1; i < p.items.size(); ++i) REQUIRE(tokens(p.items[i - 1]) >= tokens(p.items[i]));
}

}  // namespace

TEST_CASE("plan_decode covers every token once, with consistent flags", "[kernels][planner]") {
  const DecodeLaunchConfig dev = h200_bf16();
  const std::vector<std::vector<int32_t>> batches{
      {0}, {1}, {0, 0, 5}, {4096}, {32768, 1, 0, 17}, {131072, 8192, 8192, 8192, 8192, 8192, 8192, 8192},
      std::vector<int32_t>(32, 131072), std::vector<int32_t>(200, 700),
      {1048576}, {1048576, 262144, 1}};  // 1M-token contexts (issue 48)
  for (const auto& lens : batches) {
    for (int32_t chunk : {0, 1, 48, 1000, INT_MAX}) {
      int64_t items = 0;
      for (int32_t L : lens) items += std::max<int64_t>(1, (int64_t{L} + chunk - 1) / std::max(chunk, 1));
      if (chunk > 0 && items > 65535) {
        CHECK_THROWS_AS(plan_decode(dev, 4, lens, chunk), std::invalid_argument);
        continue;
      }
      const DecodePlan p = plan_decode(dev, 4, lens, chunk);
      check_plan(p, lens);
      if (chunk > 0) CHECK(p.chunk_tokens == chunk);
    }
  }
}

TEST_CASE("plan_decode fills the GPU at batch 1 and does not split a full grid", "[kernels][planner]") {
  const DecodeLaunchConfig dev = h200_bf16();
  SECTION("batch 1, 4K: enough blocks for most of the 132 SMs, chunks of at least 128 tokens") {
    const DecodePlan p = plan_decode(dev, 4, std::vector<int32_t>{4096});
    CHECK(p.items.size() * 4 >= 100);
    CHECK(p.items.size() * 4 <= 132);
    CHECK(p.chunk_tokens >= 128);
  }
  SECTION("batch 1, 128K") {
    const DecodePlan p = plan_decode(dev, 4, std::vector<int32_t>{131072});
    CHECK(p.items.size() * 4 >= 120);
  }
  SECTION("batch 32 x 128K already has 128 blocks of equal size: at most two chunks each") {
    const std::vector<int32_t> lens(32, 131072);
    const DecodePlan p = plan_decode(dev, 4, lens);
    CHECK(p.items.size() <= 64);
  }
  SECTION("ragged 128K + 7 x 8K: the long sequence is split finer than the grid needs for the short ones") {
    std::vector<int32_t> lens{131072};
    for (int i = 0; i < 7; ++i) lens.push_back(8192);
    const DecodePlan p = plan_decode(dev, 4, lens);
    CHECK(p.seq_item_begin[1] - p.seq_item_begin[0] >= 8);
    // The estimate is within 25% of the perfectly balanced bandwidth bound.
    const double bound_us = (131072.0 + 7 * 8192.0) * 4 * 1024 / 4.3e12 * 1e6;
    CHECK(p.est_us < bound_us * 1.25 + 5.0);
    // One round of long chunks whose short blocks backfill the SMs that free early, rather
    // than two full rounds (measured 191 vs 198 us on the H200, docs/bench-log).
    CHECK(p.items.size() * 4 < 2 * 132);
  }
  SECTION("two thread blocks per SM halve the chunk") {
    DecodeLaunchConfig d2 = dev;
    d2.ctas_per_sm = 2;
    const DecodePlan p1 = plan_decode(dev, 4, std::vector<int32_t>{65536});
    const DecodePlan p2 = plan_decode(d2, 4, std::vector<int32_t>{65536});
    CHECK(p2.items.size() > p1.items.size());
  }
}

TEST_CASE("automatic split chunks are whole 16-token tiles", "[kernels][planner]") {
  DecodeLaunchConfig dev = h200_bf16();
  std::vector<int32_t> ragged{131072};
  for (int i = 0; i < 7; ++i) ragged.push_back(8192);
  for (int ctas : {1, 2, 3}) {
    dev.ctas_per_sm = ctas;
    for (const auto& lens : {std::vector<int32_t>{32768}, std::vector<int32_t>{131072}, std::vector<int32_t>(8, 32768),
                             std::vector<int32_t>{1000, 3, 77777}, ragged}) {
      const DecodePlan p = plan_decode(dev, 4, lens);
      check_plan(p, lens);
      INFO("ctas per SM " << ctas << ", chunk " << p.chunk_tokens);
      if (p.needs_merge) CHECK(p.chunk_tokens % 16 == 0);
    }
  }
}

TEST_CASE("plan_decode rejects bad input", "[kernels][planner]") {
  const DecodeLaunchConfig dev = h200_bf16();
  CHECK_THROWS_AS(plan_decode(dev, 0, std::vector<int32_t>{5}), std::invalid_argument);
  CHECK_THROWS_AS(plan_decode(dev, 4, std::vector<int32_t>{-1}), std::invalid_argument);
  CHECK_THROWS_AS(plan_decode(dev, 4, std::vector<int32_t>{5}, -3), std::invalid_argument);
  DecodeLaunchConfig empty;
  empty.sm_count = 0;
  CHECK_THROWS_AS(plan_decode(empty, 4, std::vector<int32_t>{5}), std::invalid_argument);
  // More than 65535 chunks cannot be a grid dimension.
  CHECK_THROWS_AS(plan_decode(dev, 4, std::vector<int32_t>{70000}, 1), std::invalid_argument);
}

TEST_CASE("plan_decode gives token-row tiles to long chunks only", "[kernels][planner]") {
  // Q8_0 K/V at D=256 on the H200: by head 2 blocks per SM; token rows cover all 4 heads.
  DecodeLaunchConfig dev = h200_bf16();
  dev.ctas_per_sm = 2;
  dev.kv_bytes_per_token = 544;
  dev.stages = 3;
  dev.smem_bytes = 113024;
  dev.token_rows.kv_heads = 4;
  dev.token_rows.stages = 3;
  dev.token_rows.smem_bytes = 104704;
  dev.token_rows.ctas_per_sm = 2;
  auto plan = [&](const std::vector<int32_t>& lens, int32_t chunk = 0) {
    const DecodePlan p = plan_decode(dev, 4, lens, chunk);
    check_plan(p, lens);
    if (p.launch.kv_heads_per_cta > 1) {
      // The plan's device is the token-row configuration, and its chunks are whole tiles.
      CHECK(p.launch.kv_heads_per_cta == 4);
      CHECK(p.launch.smem_bytes == dev.token_rows.smem_bytes);
      CHECK(p.launch.blocks_per_item(4) == 1);
      if (p.needs_merge) CHECK(p.chunk_tokens % 16 == 0);
    } else {
      CHECK(p.launch.smem_bytes == dev.smem_bytes);
      CHECK(p.launch.blocks_per_item(4) == 4);
    }
    CHECK(p.launch.token_rows.kv_heads == 4);  // still known to the next plan
    return p;
  };
  // Long batches: every block streams thousands of tokens of all four heads.
  CHECK(plan(std::vector<int32_t>(32, 131072)).launch.kv_heads_per_cta == 4);
  CHECK(plan(std::vector<int32_t>(8, 131072)).launch.kv_heads_per_cta == 4);
  // Batch 1 and short batches: a block per head, 4x fewer partials.
  CHECK(plan(std::vector<int32_t>{131072}).launch.kv_heads_per_cta == 1);
  CHECK(plan(std::vector<int32_t>(8, 4096)).launch.kv_heads_per_cta == 1);
  CHECK(plan(std::vector<int32_t>{7, 300}).launch.kv_heads_per_cta == 1);
  // A forced chunk length takes them (the GPU tests' split 48).
  CHECK(plan(std::vector<int32_t>{7, 300, 1000}, 48).launch.kv_heads_per_cta == 4);
  // A forced length that is not whole tiles: by head.
  CHECK(plan(std::vector<int32_t>{7, 300, 1000}, 40).launch.kv_heads_per_cta == 1);
  // Unavailable (head count other than the pools'): by head.
  CHECK(plan_decode(dev, 8, std::vector<int32_t>(32, 131072)).launch.kv_heads_per_cta == 1);
}
