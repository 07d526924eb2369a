// The step script of the recorded-step tests (tests/model_cuda/test_cuda_step_graphs_gpu.cpp,
// tests/model/test_step_graph_script.cpp): prefills of very different lengths, decode steps of
// 3, 4 and 5 sequences across block boundaries and two table widths, verify steps with row
// states, batches of 1 and 2, while one sequence (the bystander) sits out; the same on any
// backend, so that the padding is checked on the CPU and the recordings on the GPU.
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kvcache/block_pool.h"
#include "kvcache/state_pool.h"
#include "model/qwen35/model.h"

namespace ds::test::step_graph_script {

// "equal", or where two float vectors first differ and in how many places: what a failing
// check prints instead of the vectors themselves (megabytes of state).
inline std::string first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size());
  size_t first = a.size(), count = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i]) && !(a[i] != a[i] && b[i] != b[i])) {  // NaN equals NaN here
      if (first == a.size()) first = i;
      ++count;
    }
  if (count == 0) return "equal";
  return std::to_string(count) + " of " + std::to_string(a.size()) + " differ, first at " + std::to_string(first) +
         ": " + std::to_string(a[first]) + " vs " + std::to_string(b[first]);
}

// Where index i of a state vector (as Run::bystander_* hold it: per DeltaNet layer, the conv
// state then the recurrent state) lies.
inline std::string state_location(const qwen35::Model& model, size_t i) {
  const auto& st = model.cache_geometry().state;
  const auto conv = static_cast<size_t>(st.conv_dim * st.conv_taps);
  const auto rec = static_cast<size_t>(st.value_heads * st.key_dim * st.value_dim);
  const size_t layer = i / (conv + rec), at = i % (conv + rec);
  return "deltanet layer " + std::to_string(layer) + (at < conv ? ", conv state element " + std::to_string(at)
                                                                : ", recurrent state element " + std::to_string(at - conv));
}

enum class Mode { recorded, padded_eager, eager };

// One run of a fixed script of steps on a fresh cache; everything it observed.
struct Run {
  std::vector<std::vector<float>> logits;  // per step
  std::vector<float> bystander_before, bystander_after;  // a sequence outside the decode steps
  std::vector<float> bystander_logits;
  qwen35::Model::StepGraphStats stats;
};

struct Seq {
  explicit Seq(int32_t bs) : table(bs) {}
  kvcache::BlockTable table;
  kvcache::SlotHandle slot;
  std::vector<kvcache::SlotHandle> row_slots;  // verify steps' row states
};

constexpr int32_t kBlockSize = 16;
constexpr int64_t kMaxSeqLen = 2048;  // table widths 64 and 128 blocks; longer runs eagerly

inline Run run_script(qwen35::Model& model, kernels::Backend& be, Mode mode) {
  kvcache::PoolSizes sizes;
  sizes.num_blocks = 600;
  sizes.block_size = kBlockSize;
  sizes.num_slots = 48;
  model.allocate_cache(sizes);
  if (mode != Mode::eager)
    model.enable_step_graphs({.max_seq_len = kMaxSeqLen, .max_batch = 64, .record = mode == Mode::recorded});
  kvcache::BlockPool blocks(sizes.num_blocks, kBlockSize);
  kvcache::StatePool slots(sizes.num_slots, model.cache_geometry().state, model.state_zero_fn());
  std::vector<kvcache::Reservation> spare;
  for (int32_t b = 0; b < sizes.num_blocks; ++b) spare.push_back(std::move(*blocks.reserve(1)));
  std::shuffle(spare.begin(), spare.end(), std::mt19937_64(7));  // tables scattered over the pool
  std::mt19937 rng(11);
  auto tokens = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % 1000);
    return t;
  };
  std::deque<Seq> seqs;
  Run run;
  // One step: parts = (sequence, new tokens, logit rows, row states).
  struct Part {
    int seq;
    int64_t n;
    int32_t logit_rows;
    bool row_states;
  };
  auto step = [&](const std::vector<Part>& parts) {
    std::vector<std::vector<int32_t>> toks;
    qwen35::ForwardBatch batch;
    std::vector<std::vector<kvcache::SlotId>> rs(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      Seq& s = seqs[static_cast<size_t>(parts[i].seq)];
      toks.push_back(tokens(parts[i].n));
      for (int32_t k = s.table.blocks_needed(parts[i].n); k > 0; --k) {
        blocks.commit(spare.back(), s.table);
        spare.pop_back();
      }
      if (parts[i].row_states) {
        while (static_cast<int64_t>(s.row_slots.size()) < parts[i].n - 1) s.row_slots.push_back(*slots.acquire());
        for (int64_t r = 0; r + 1 < parts[i].n; ++r) rs[i].push_back(s.row_slots[static_cast<size_t>(r)].id);
      }
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      Seq& s = seqs[static_cast<size_t>(parts[i].seq)];
      batch.seqs.push_back({toks[i], s.table.num_tokens(), s.table.block_ids(), s.slot.id, parts[i].logit_rows, rs[i]});
    }
    std::vector<float> out = model.forward(batch).to_host();
    for (size_t i = 0; i < parts.size(); ++i)
      seqs[static_cast<size_t>(parts[i].seq)].table.append_tokens(parts[i].n);
    return out;
  };
  auto state = [&](int i) {
    std::vector<float> all;
    const Seq& s = seqs[static_cast<size_t>(i)];
    for (int64_t l = 0; l < model.config().num_deltanet_layers(); ++l)
      for (const kernels::Tensor& t : {model.conv_state(s.slot.id, l), model.recurrent_state(s.slot.id, l)}) {
        std::vector<float> v(static_cast<size_t>(t.numel()));
        be.copy_to_host(t, v);
        all.insert(all.end(), v.begin(), v.end());
      }
    return all;
  };
  // Prompts of very different lengths, prefilled one by one (long chunks run eagerly): 1, 37,
  // 500 and, near the widest table, 2044 tokens; then the bystander.
  for (int64_t len : {1, 37, 500, 2044, 300, 45, 9}) {
    seqs.emplace_back(kBlockSize);
    seqs.back().slot = *slots.acquire();
    for (int64_t done = 0; done < len;) {
      const int64_t n = std::min<int64_t>(256, len - done);
      step({{static_cast<int>(seqs.size() - 1), n, 1, false}});
      done += n;
    }
  }
  const int bystander = 4;
  run.bystander_before = state(bystander);
  // Decode steps of 3 sequences (padded to 4), crossing block boundaries (37 -> 48 -> 64);
  // then the 2044-token one joins (width 128 blocks) until it grows past the widest table
  // (2048: eager steps); then 5 sequences (padded to 8).
  for (int s = 0; s < 24; ++s) {
    std::vector<Part> parts{{0, 1, 1, false}, {1, 1, 1, false}, {2, 1, 1, false}};
    if (s >= 8 && s < 16) parts.push_back({3, 1, 1, false});
    if (s >= 16) {
      parts.push_back({5, 1, 1, false});
      parts.push_back({6, 1, 1, false});
    }
    run.logits.push_back(step(parts));
  }
  // Verify steps: 4 rows each with 3 row states and 4 logit rows, 3 sequences (padded to 4).
  for (int s = 0; s < 4; ++s)
    run.logits.push_back(step({{0, 4, 4, true}, {1, 4, 4, true}, {5, 4, 4, true}}));
  // One sequence alone (bucket 1: no padding) and a batch of 2.
  for (int s = 0; s < 3; ++s) run.logits.push_back(step({{2, 1, 1, false}}));
  for (int s = 0; s < 3; ++s) run.logits.push_back(step({{1, 1, 1, false}, {6, 1, 1, false}}));
  run.bystander_after = state(bystander);
  run.bystander_logits = step({{bystander, 1, 1, false}});
  run.stats = model.step_graph_stats();
  return run;
}


}  // namespace ds::test::step_graph_script
