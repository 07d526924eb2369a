// Gathers the rows whose logits are wanted, so the final norm and lm_head run on those only.
#include <cstring>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void gather_rows(const Tensor& x, const BatchPlan& plan, Tensor& out) {
  const char* op = "gather_rows";
  check_f32(x, op, "x");
  check_f32(out, op, "out");
  DS_CHECK(x.rank() == 2 && x.dim(0) == plan.num_rows(), op,
        "x must be [rows, H], got " + x.shape().str());
  const int64_t h = x.dim(1);
  const auto& rows = plan.logit_rows();
  DS_CHECK((out.shape() == Shape{static_cast<int64_t>(rows.size()), h}), op,
        "out must be [logit rows, H], got " + out.shape().str());
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(out.data_as<float>() + static_cast<int64_t>(i) * h, x.data_as<const float>() + rows[i] * h,
                static_cast<size_t>(h) * sizeof(float));
}

}  // namespace ds::kernels::cpu
