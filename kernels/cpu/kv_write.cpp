// Writes each new token's K and V rows into the paged pools at the slot the plan gives it
// (block * block_size + offset; the pool is [num_blocks, block_size, Nkv, D]).
#include <cstring>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

namespace {
void check_pool(const Tensor& pool, const Tensor& rows, const BatchPlan& plan, const char* name) {
  const char* op = "kv_write";
  check_f32(pool, op, name);
  DS_CHECK(pool.rank() == 4 && pool.dim(1) == plan.block_size() && pool.dim(2) == rows.dim(1) &&
            pool.dim(3) == rows.dim(2),
        op, std::string(name) + " must be [blocks, " + std::to_string(plan.block_size()) + ", " +
                std::to_string(rows.dim(1)) + ", " + std::to_string(rows.dim(2)) + "], got " +
                pool.shape().str());
  const int64_t slots = pool.dim(0) * pool.dim(1);
  for (int64_t s : plan.kv_slots()) DS_CHECK(s >= 0 && s < slots, op, "K/V slot outside the pool");
}
}  // namespace

void kv_write(const Tensor& k, const Tensor& v, const BatchPlan& plan, Tensor& k_pool,
              Tensor& v_pool) {
  const char* op = "kv_write";
  check_f32(k, op, "k");
  check_f32(v, op, "v");
  DS_CHECK(k.rank() == 3 && k.dim(0) == plan.num_rows() && v.shape() == k.shape(), op,
        "k and v must be [rows, Nkv, D], got " + k.shape().str() + ", " + v.shape().str());
  check_pool(k_pool, k, plan, "k_pool");
  check_pool(v_pool, v, plan, "v_pool");
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
