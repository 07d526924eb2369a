// LoRA's gathered shrink and expand (backend.h): each row reads its own slot's A and B, so a
// batch mixes adapters; rows without one are skipped. The expand reads its ranks from a column
// range of tmp (a shrink shared by the projections that read one input).
#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void lora_shrink(ThreadPool& pool, const Tensor& x, const Tensor& a, const BatchPlan& plan, Tensor& tmp) {
  const int64_t rows = x.dim(0), k = x.dim(1), rank = a.dim(1);
  const float* xs = x.data_as<const float>();
  const float* as = a.data_as<const float>();
  float* t = tmp.data_as<float>();
  const auto& slots = plan.row_lora_slots();
  pool.parallel_for(rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* out = t + r * rank;
      const int32_t s = slots[static_cast<size_t>(r)];
      if (s < 0) continue;
      const float* xr = xs + r * k;
      const float* ar = as + static_cast<int64_t>(s) * rank * k;
      for (int64_t i = 0; i < rank; ++i) {
        const float* w = ar + i * k;
        float acc = 0;
        for (int64_t j = 0; j < k; ++j) acc += w[j] * xr[j];
        out[i] = acc;
      }
    }
  });
}

void lora_expand(ThreadPool& pool, const Tensor& tmp, int64_t first_rank, const Tensor& b, const BatchPlan& plan,
                 int64_t col_offset, Tensor& out) {
  const int64_t rows = tmp.dim(0), ld_t = tmp.dim(1), rank = b.dim(2), n = b.dim(1), ld = out.dim(1);
  const float* t = tmp.data_as<const float>();
  const float* bs = b.data_as<const float>();
  float* o = out.data_as<float>();
  const auto& slots = plan.row_lora_slots();
  pool.parallel_for(rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int32_t s = slots[static_cast<size_t>(r)];
      if (s < 0) continue;
      const float* tr = t + r * ld_t + first_rank;
      const float* br = bs + static_cast<int64_t>(s) * n * rank;
      float* y = o + r * ld + col_offset;
      for (int64_t j = 0; j < n; ++j) {
        const float* w = br + j * rank;
        float acc = 0;
        for (int64_t i = 0; i < rank; ++i) acc += w[i] * tr[i];
        y[j] += acc;
      }
    }
  });
}

}  // namespace ds::kernels::cpu
