// Embedding lookup: each row's token id selects a row of the table.
#include <cstring>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void embedding(ThreadPool& pool, const Tensor& table, const BatchPlan& plan, Tensor& out) {
  const char* op = "embedding";
  check_f32(table, op, "table");
  check_f32(out, op, "out");
  DS_CHECK(table.rank() == 2, op, "table must be [V, H], got " + table.shape().str());
  const int64_t vocab = table.dim(0), h = table.dim(1);
  DS_CHECK((out.shape() == Shape{plan.num_rows(), h}), op,
        "out must be [rows, H] = " + Shape{plan.num_rows(), h}.str() + ", got " + out.shape().str());
  const auto& ids = plan.token_ids();
  for (int32_t id : ids) DS_CHECK(id >= 0 && id < vocab, op, "token id " + std::to_string(id) + " outside the table");
  const float* src = table.data_as<const float>();
  float* dst = out.data_as<float>();
  pool.parallel_for(plan.num_rows(), 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      std::memcpy(dst + r * h, src + static_cast<int64_t>(ids[static_cast<size_t>(r)]) * h,
                  static_cast<size_t>(h) * sizeof(float));
  });
}

}  // namespace ds::kernels::cpu
