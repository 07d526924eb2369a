// Causal attention through the paged K/V pools, for a mixed batch: every row (a decode token
// or a prefill-chunk token at position p) attends to positions [0, p] of its own sequence,
// found block by block through the sequence's block table. That covers the earlier context
// and the causal part of its own chunk alike, since kv_write has stored the chunk first.
//
// One work item is (row, KV head): the query heads of that GQA group are scored together so
// each K and V row is read once. Softmax in f32 as HF's eager path does: scores * scale,
// subtract the max, exp, normalise, then weight the V rows.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/vec.h"

namespace ds::kernels::cpu {

namespace {

// One (row, KV head): the `group` query heads at qrow over the first n_keys positions of
// the sequence whose block ids are ids. scores holds group * n_keys floats.
DS_CPU_CLONES void attend(const float* qrow, int64_t group, int64_t d, const float* ks, const float* vs,
                          const int32_t* ids, int64_t bs, int64_t n_kv, int64_t kvh, int64_t n_keys, float scale,
                          float* scores, float* out) {
  for (int64_t t = 0; t < n_keys; ++t) {
    const float* krow = ks + ((ids[t / bs] * bs + t % bs) * n_kv + kvh) * d;
    for (int64_t g = 0; g < group; ++g) scores[g * n_keys + t] = dot(qrow + g * d, krow, d) * scale;
  }
  for (int64_t g = 0; g < group; ++g) {
    float* sc = scores + g * n_keys;
    const float mx = *std::max_element(sc, sc + n_keys);
    double sum = 0.0;  // thousands of terms: sum them in double
    for (int64_t t = 0; t < n_keys; ++t) {
      sc[t] = std::exp(sc[t] - mx);
      sum += sc[t];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t t = 0; t < n_keys; ++t) sc[t] *= inv;
    std::fill(out + g * d, out + (g + 1) * d, 0.0f);
  }
  for (int64_t t = 0; t < n_keys; ++t) {
    const float* vrow = vs + ((ids[t / bs] * bs + t % bs) * n_kv + kvh) * d;
    for (int64_t g = 0; g < group; ++g) axpy(scores[g * n_keys + t], vrow, out + g * d, d);
  }
}

}  // namespace

void paged_attention(ThreadPool& pool, const Tensor& q, const Tensor& k_pool,
                     const Tensor& v_pool, const BatchPlan& plan, float scale, Tensor& out) {
  const int64_t n_q = q.dim(1), d = q.dim(2);
  const int64_t bs = k_pool.dim(1), n_kv = k_pool.dim(2);
  const int64_t group = n_q / n_kv;

  const float* qs = q.data_as<const float>();
  const float* ks = k_pool.data_as<const float>();
  const float* vs = v_pool.data_as<const float>();
  float* os = out.data_as<float>();
  const auto& positions = plan.positions();
  const auto& row_seq = plan.row_seq();
  const int32_t* all_ids = plan.block_ids().data();

  pool.parallel_for(plan.num_rows() * n_kv, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t row = item / n_kv, kvh = item % n_kv;
      const auto& seq = plan.seqs()[static_cast<size_t>(row_seq[static_cast<size_t>(row)])];
      const int32_t* ids = all_ids + seq.block_begin;
      const int64_t n_keys = positions[static_cast<size_t>(row)] + 1;
      scores.resize(static_cast<size_t>(group * n_keys));
      attend(qs + (row * n_q + kvh * group) * d, group, d, ks, vs, ids, bs, n_kv, kvh, n_keys, scale,
             scores.data(), os + (row * n_q + kvh * group) * d);
    }
  });
}

}  // namespace ds::kernels::cpu
