// Gathers the rows whose logits are wanted, so the final norm and lm_head run on those only.
#include <cstring>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void gather_rows(const Tensor& x, const BatchPlan& plan, Tensor& out) {
  const int64_t h = x.dim(1);
  const auto& rows = plan.logit_rows();
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(out.data_as<float>() + static_cast<int64_t>(i) * h, x.data_as<const float>() + rows[i] * h,
                static_cast<size_t>(h) * sizeof(float));
}

}  // namespace ds::kernels::cpu
