// Non-causal attention within segments (the vision encoder's images): per segment, head and
// block of 64 query rows, the scores against every key of the segment by one sgemm, a softmax
// in f32 (sum in double), and the weighted values by a second sgemm, straight from the
// [rows, heads, d] layouts (leading dimension heads * d). Memory is one block of scores per
// thread, whatever the image's size.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void segment_attention(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v, const VisionPlan& plan,
                       float scale, Tensor& out) {
  constexpr int64_t kBlock = 64;
  const int64_t heads = q.dim(1), d = q.dim(2), ld = heads * d;
  const float* qs = q.data_as<const float>();
  const float* ks = k.data_as<const float>();
  const float* vs = v.data_as<const float>();
  float* os = out.data_as<float>();
  // Work items: (segment, head, query block).
  struct Item {
    int64_t seg_begin, seg_len, head, q0, nq;
  };
  std::vector<Item> items;
  const auto& off = plan.offsets();
  for (int64_t s = 0; s + 1 < static_cast<int64_t>(off.size()); ++s) {
    const int64_t b = off[static_cast<size_t>(s)], n = off[static_cast<size_t>(s + 1)] - b;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t q0 = 0; q0 < n; q0 += kBlock) items.push_back({b, n, h, q0, std::min(kBlock, n - q0)});
  }
  pool.parallel_for(static_cast<int64_t>(items.size()), 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    for (int64_t it = begin; it < end; ++it) {
      const Item& w = items[static_cast<size_t>(it)];
      scores.resize(static_cast<size_t>(w.nq * w.seg_len));
      const float* qb = qs + (w.seg_begin + w.q0) * ld + w.head * d;
      const float* kb = ks + w.seg_begin * ld + w.head * d;
      const float* vb = vs + w.seg_begin * ld + w.head * d;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(w.nq), static_cast<blasint>(w.seg_len),
                  static_cast<blasint>(d), scale, qb, static_cast<blasint>(ld), kb, static_cast<blasint>(ld), 0.0f,
                  scores.data(), static_cast<blasint>(w.seg_len));
      for (int64_t r = 0; r < w.nq; ++r) {
        float* row = scores.data() + r * w.seg_len;
        const float mx = *std::max_element(row, row + w.seg_len);
        double sum = 0;
        for (int64_t j = 0; j < w.seg_len; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t j = 0; j < w.seg_len; ++j) row[j] *= inv;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(w.nq), static_cast<blasint>(d),
                  static_cast<blasint>(w.seg_len), 1.0f, scores.data(), static_cast<blasint>(w.seg_len), vb,
                  static_cast<blasint>(ld), 0.0f, os + (w.seg_begin + w.q0) * ld + w.head * d, static_cast<blasint>(ld));
    }
  });
}

}  // namespace ds::kernels::cpu
