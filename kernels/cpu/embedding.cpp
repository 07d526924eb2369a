// Embedding lookup: each row's token id selects a row of the table.
#include <cstring>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void embedding(ThreadPool& pool, const Tensor& table, const BatchPlan& plan, Tensor& out) {
  const int64_t h = table.dim(1);
  const auto& ids = plan.token_ids();
  const float* src = table.data_as<const float>();
  float* dst = out.data_as<float>();
  pool.parallel_for(plan.num_rows(), 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      std::memcpy(dst + r * h, src + static_cast<int64_t>(ids[static_cast<size_t>(r)]) * h,
                  static_cast<size_t>(h) * sizeof(float));
  });
}

}  // namespace ds::kernels::cpu
