// Writes each new token's K and V rows into the paged pools at the slot the plan gives it
// (block * block_size + offset; the pool is [num_blocks, block_size, Nkv, D]).
#include <cstring>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void kv_write(const Tensor& k, const Tensor& v, const BatchPlan& plan, Tensor& k_pool,
              Tensor& v_pool) {
  const int64_t row = k.dim(1) * k.dim(2);
  const size_t bytes = static_cast<size_t>(row) * sizeof(float);
  const auto& slots = plan.kv_slots();
  for (int64_t r = 0; r < plan.num_rows(); ++r) {
    const int64_t at = slots[static_cast<size_t>(r)] * row;
    std::memcpy(k_pool.data_as<float>() + at, k.data_as<const float>() + r * row, bytes);
    std::memcpy(v_pool.data_as<float>() + at, v.data_as<const float>() + r * row, bytes);
  }
}

}  // namespace ds::kernels::cpu
