// plan_decode: split-K planning for paged decode attention (host only, no GPU calls).
//
// Every (sequence chunk, KV head) is one thread block (one per chunk when a block covers every
// head: DecodeLaunchConfig::kv_heads_per_cta); they run on sm_count x ctas_per_sm
// slots. Candidate chunk lengths are the smallest that fit the grid into k full rounds of
// slots (k = 1..8, found by bisection, as FlashInfer does for one round), twice each of those
// (fewer rounds whose short blocks backfill the slots that free early: the ragged batch), and
// "no split"; each is scored by list-scheduling the blocks, longest first, onto the slots (a
// block starts on the slot that frees first, as the hardware hands them out; estimate_us),
// and splitting adds the merge.
// Chunks never go below kMinChunk token-heads per block (kMinChunk tokens of one head, or a
// quarter of that when a block covers four heads; short chunks pay start-up more than they
// gain), and
// split chunks are whole 16-token tiles: the tensor-core kernel's tiles then never straddle a
// chunk boundary, and its bulk tensor copies (which need 16-aligned tiles) stay usable.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/paged_attention.h"

namespace ds::cuda {
namespace {

constexpr int32_t kMinChunk = 128;
constexpr int32_t kTokenRowsMinChunk = 1000;  // shortest chunk the planner gives token-row tiles
constexpr int64_t kTileTokens = 16;
// The cost model's constants are calibrated on the H200 (docs/bench-log, "Paged attention
// decode"): the read bandwidth when every SM holds a long chunk, each thread block's start-up
// and tail beyond its bytes, and what merging split sequences costs the last chunk.
constexpr double kReadBandwidth = 4.5e12;
constexpr double kBlockStartUs = 10.0;
constexpr double kMergeUs = 3.0;
constexpr int64_t kMaxGridY = 65535;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t count_ctas(std::span<const int32_t> lens, int64_t chunk, int64_t per_item) {
  int64_t n = 0;
  for (int32_t L : lens) n += std::max<int64_t>(1, ceil_div(L, chunk));
  return n * per_item;
}

// Estimated microseconds for a chunk length: the blocks, longest first, each on the slot that
// frees first; a block lasts its start-up plus its K/V bytes at one slot's share of the read
// bandwidth. Blocks of one length are placed a full round of slots at a time where they can
// be, so the estimate costs O((n_seqs + slots) log slots) per candidate.
double estimate_us(const DecodeLaunchConfig& cfg, int64_t per_item, std::span<const int32_t> lens, int64_t chunk) {
  const int64_t slots = std::max<int64_t>(1, int64_t{cfg.sm_count} * cfg.ctas_per_sm);
  const double bytes_per_us = kReadBandwidth / 1e6 / static_cast<double>(slots);
  const double tok_us =
      static_cast<double>(std::max<int64_t>(cfg.kv_bytes_per_token, 1) * cfg.kv_heads_per_cta) / bytes_per_us;
  int64_t full = 0;  // blocks of exactly `chunk` tokens
  std::vector<int64_t> tails;  // shorter last chunks, one entry per sequence
  bool split = false;
  for (int32_t L : lens) {
    const int64_t n = std::max<int64_t>(1, ceil_div(L, chunk));
    split = split || n > 1;
    full += (L / chunk) * per_item;
    if (L % chunk != 0 || L == 0) tails.push_back(L % chunk);
  }
  std::sort(tails.begin(), tails.end(), std::greater<>());
  // Finish times of the slots in use, earliest on top; `base` is what whole rounds of equal
  // blocks added to every one of them.
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  const int64_t used = std::min<int64_t>(slots, full + static_cast<int64_t>(tails.size()) * per_item);
  for (int64_t i = 0; i < used; ++i) free_at.push(0.0);
  double base = 0;
  auto place = [&](int64_t toks, int64_t count) {
    const double d = kBlockStartUs + tok_us * static_cast<double>(toks);
    const int64_t n = static_cast<int64_t>(free_at.size());
    if (n == 0) return;
    const int64_t rounds = count / n;
    base += d * static_cast<double>(rounds);
    for (int64_t i = rounds * n; i < count; ++i) {
      const double t = free_at.top();
      free_at.pop();
      free_at.push(t + d);
    }
  };
  place(chunk, full);
  for (int64_t t : tails) place(t, per_item);
  double end = 0;
  while (!free_at.empty()) {
    end = std::max(end, free_at.top());
    free_at.pop();
  }
  return base + end + (split ? kMergeUs : 0.0);
}

}  // namespace

namespace {

DecodePlan plan_for(const DecodeLaunchConfig& cfg, int32_t n_kv_heads, std::span<const int32_t> seq_lens,
                    int32_t chunk_tokens) {
  if (n_kv_heads <= 0) throw std::invalid_argument("plan_decode: n_kv_heads must be positive");
  if (cfg.head_chunks <= 0 || cfg.sm_count <= 0 || cfg.ctas_per_sm <= 0 || cfg.kv_heads_per_cta <= 0)
    throw std::invalid_argument("plan_decode: DecodeLaunchConfig is not initialised (use choose_decode_launch)");
  if (chunk_tokens < 0) throw std::invalid_argument("plan_decode: negative chunk_tokens");
  int64_t max_len = 0;
  for (int32_t L : seq_lens) {
    if (L < 0) throw std::invalid_argument("plan_decode: negative sequence length");
    max_len = std::max<int64_t>(max_len, L);
  }
  const int64_t per_item = cfg.blocks_per_item(n_kv_heads);
  const int64_t no_split = std::max<int64_t>(max_len, 1);

  int64_t chunk = chunk_tokens;
  double best_us = 0;
  if (chunk == 0) {
    std::vector<int64_t> candidates{no_split};
    const int64_t slots = int64_t{cfg.sm_count} * cfg.ctas_per_sm;
    for (int64_t k = 1; k <= 8; ++k) {
      const int64_t budget = k * slots;
      if (count_ctas(seq_lens, no_split, per_item) >= budget) continue;  // already k rounds unsplit
      const int64_t min_chunk = std::max<int64_t>(kTileTokens, kMinChunk / cfg.kv_heads_per_cta);
      int64_t lo = std::min<int64_t>(min_chunk, no_split), hi = no_split;  // count(hi) <= budget
      if (count_ctas(seq_lens, lo, per_item) <= budget) {
        hi = lo;
      } else {
        while (hi - lo > 1) {
          const int64_t mid = (lo + hi) / 2;
          (count_ctas(seq_lens, mid, per_item) <= budget ? hi : lo) = mid;
        }
      }
      // Rounding up only lowers the block count, so the candidate still fits k rounds.
      const int64_t c = std::min(no_split, ceil_div(hi, kTileTokens) * kTileTokens);
      candidates.push_back(c);
      candidates.push_back(std::min(no_split, 2 * c));
    }
    std::vector<std::pair<double, int64_t>> scored;
    best_us = std::numeric_limits<double>::infinity();
    for (int64_t c : candidates) {
      scored.emplace_back(estimate_us(cfg, per_item, seq_lens, c), c);
      best_us = std::min(best_us, scored.back().first);
    }
    // Near-ties go to the longer chunk: fewer partials to merge.
    chunk = 0;
    for (auto [us, c] : scored)
      if (us <= best_us * 1.001) chunk = std::max(chunk, c);
  } else {
    best_us = estimate_us(cfg, per_item, seq_lens, chunk);
  }
  chunk = std::min<int64_t>(chunk, std::numeric_limits<int32_t>::max());

  DecodePlan plan;
  plan.n_seqs = static_cast<int32_t>(seq_lens.size());
  plan.chunk_tokens = static_cast<int32_t>(chunk);
  plan.n_kv_heads = n_kv_heads;
  plan.launch = cfg;
  plan.est_us = best_us;
  plan.seq_item_begin.assign(seq_lens.size() + 1, 0);
  for (size_t i = 0; i < seq_lens.size(); ++i) {
    const int64_t n = std::max<int64_t>(1, ceil_div(seq_lens[i], chunk));
    plan.needs_merge = plan.needs_merge || n > 1;
    plan.seq_item_begin[i + 1] = plan.seq_item_begin[i] + static_cast<int32_t>(n);
    for (int64_t j = 0; j < n; ++j) {
      DecodeWorkItem it;
      it.seq = static_cast<int32_t>(i);
      it.token_begin = static_cast<int32_t>(j * chunk);
      it.flags = (j == n - 1 ? kItemLast : 0) | (n == 1 ? kItemOnly : 0);
      it.partial = plan.seq_item_begin[i] + static_cast<int32_t>(j);
      plan.items.push_back(it);
    }
  }
  if (static_cast<int64_t>(plan.items.size()) > kMaxGridY)
    throw std::invalid_argument("plan_decode: " + std::to_string(plan.items.size()) +
                                " work items exceed the grid limit of 65535; use a longer chunk_tokens");
  // Longest chunks first: the hardware hands out thread blocks in grid order.
  auto tokens = [&](const DecodeWorkItem& it) {
    return std::min<int64_t>(chunk, seq_lens[it.seq] - int64_t{it.token_begin});
  };
  std::stable_sort(plan.items.begin(), plan.items.end(),
                   [&](const DecodeWorkItem& a, const DecodeWorkItem& b) { return tokens(a) > tokens(b); });
  return plan;
}

}  // namespace

DecodePlan plan_decode(const DecodeLaunchConfig& cfg, int32_t n_kv_heads, std::span<const int32_t> seq_lens,
                       int32_t chunk_tokens) {
  auto by_head = [&] {
    DecodeLaunchConfig d = cfg;
    d.token_rows = {};
    DecodePlan h = plan_for(d, n_kv_heads, seq_lens, chunk_tokens);
    h.launch.token_rows = cfg.token_rows;  // still offered to the next batch
    return h;
  };
  if (cfg.token_rows.kv_heads <= 0 || cfg.token_rows.kv_heads != n_kv_heads || chunk_tokens % 16 != 0) return by_head();
  // Token-row tiles: a block covers every head, so the same grid has a quarter of the chunks'
  // length. They read faster once blocks stream long chunks; for short chunks the split by
  // head wins (4x fewer partials to merge; B=1 and the ragged batch were slower with token
  // rows: docs/bench-log, "token-row tiles for quantised K/V").
  // A forced chunk length (a multiple of 16) takes them whenever the pools allow.
  DecodeLaunchConfig by_rows = cfg;
  by_rows.kv_heads_per_cta = cfg.token_rows.kv_heads;
  by_rows.stages = cfg.token_rows.stages;
  by_rows.smem_bytes = cfg.token_rows.smem_bytes;
  by_rows.ctas_per_sm = cfg.token_rows.ctas_per_sm;
  DecodePlan p = plan_for(by_rows, n_kv_heads, seq_lens, chunk_tokens);
  if (chunk_tokens > 0 || !p.needs_merge || p.chunk_tokens >= kTokenRowsMinChunk) return p;
  return by_head();
}

}  // namespace ds::cuda
