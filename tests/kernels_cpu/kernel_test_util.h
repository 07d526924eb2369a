// Helpers for the CPU kernel tests: tensors from host vectors and back, random data, and
// batch plans from a compact description.
#pragma once

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"

namespace ds::test {

inline std::unique_ptr<kernels::Backend> cpu(int threads = 2) {
  return kernels::cpu::make_cpu_backend({threads});
}

inline std::vector<float> random_vec(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline kernels::Tensor make(kernels::Backend& be, const kernels::Shape& shape, const std::vector<float>& data) {
  kernels::Tensor t = be.alloc(DType::f32, shape);
  be.copy_from_host(data, t);
  return t;
}

inline kernels::Tensor zeros(kernels::Backend& be, const kernels::Shape& shape) {
  kernels::Tensor t = be.alloc(DType::f32, shape);
  be.fill_zero(t);
  return t;
}

inline std::vector<float> get(kernels::Backend& be, const kernels::Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  be.copy_to_host(t, v);
  return v;
}

// max |a - b| / max(1, |b|)
inline double max_err(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::abs(b[i])));
  return a.size() == b.size() ? worst : INFINITY;
}

struct SeqDesc {
  int64_t n_tokens;
  int64_t n_cached;
  int32_t slot;
  std::vector<int32_t> blocks;
  std::vector<int32_t> row_states = {};  // row-state slots (batch_plan.h)
  std::vector<kernels::SnapshotRow> snapshots = {};  // snapshot rows (batch_plan.h)
  int32_t logit_rows = 0;  // its last rows whose logits are gathered
  int32_t lora_slot = -1;  // its LoRA slot (batch_plan.h)
};

// A plan over seqs (token ids all zero unless given: one per row, the sequences back to back).
inline std::unique_ptr<kernels::BatchPlan> plan_of(kernels::Backend& be, const std::vector<SeqDesc>& seqs,
                                                   int32_t block_size, int32_t num_blocks, int32_t num_slots,
                                                   std::vector<int32_t> tokens = {}, int32_t table_blocks = 0) {
  int64_t rows = 0;
  for (const auto& s : seqs) rows += s.n_tokens;
  if (tokens.empty()) tokens.assign(static_cast<size_t>(rows), 0);
  if (static_cast<int64_t>(tokens.size()) != rows) throw std::invalid_argument("plan_of: one token id per row");
  std::vector<kernels::SequenceChunk> chunks;
  int64_t row = 0;
  for (const auto& s : seqs) {
    const std::span<const int32_t> ids(tokens.data() + row, static_cast<size_t>(std::max<int64_t>(s.n_tokens, 0)));
    chunks.push_back({ids, s.n_cached, s.blocks, s.slot, s.logit_rows, s.row_states, s.snapshots});
    chunks.back().lora_slot = s.lora_slot;
    row += s.n_tokens;
  }
  kernels::BatchDesc d;
  d.seqs = chunks;
  d.block_size = block_size;
  d.num_blocks = num_blocks;
  d.num_slots = num_slots;
  d.vocab_size = 1 << 20;
  d.table_blocks = table_blocks;
  return be.plan(d);
}

}  // namespace ds::test
