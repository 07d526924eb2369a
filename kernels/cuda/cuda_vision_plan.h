// CudaVisionPlan: a vision step's plan (kernels/vision_plan.h) with its arrays uploaded in one
// device allocation, what the vision kernels read.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/cuda/cuda_context.h"
#include "kernels/vision_plan.h"

namespace ds::cuda {

class CudaVisionPlan final : public kernels::VisionPlan {
 public:
  CudaVisionPlan(const kernels::VisionBatchDesc& desc, CudaContext& ctx);

  const int64_t* d_offsets = nullptr;   // num_segments() + 1
  const int32_t* d_pos_index = nullptr;  // rows * taps
  const float* d_pos_weight = nullptr;  // rows * taps
  const float* d_cos = nullptr;         // rows * rope_half
  const float* d_sin = nullptr;

 private:
  std::shared_ptr<void> storage_;
};

}  // namespace ds::cuda
