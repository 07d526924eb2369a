#include "kernels/cuda/cuda_vision_plan.h"

#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace ds::cuda {

CudaVisionPlan::CudaVisionPlan(const kernels::VisionBatchDesc& desc, CudaContext& ctx) : kernels::VisionPlan(desc) {
  auto align = [](size_t n) { return (n + 255) / 256 * 256; };
  const size_t b_off = offsets().size() * 8, b_idx = pos_index().size() * 4, b_w = pos_weight().size() * 4,
               b_rot = rope_cos().size() * 4;
  const size_t at_idx = align(b_off), at_w = at_idx + align(b_idx), at_cos = at_w + align(b_w),
               at_sin = at_cos + align(b_rot), total = at_sin + align(b_rot);
  std::vector<unsigned char> host(total);
  std::memcpy(host.data(), offsets().data(), b_off);
  std::memcpy(host.data() + at_idx, pos_index().data(), b_idx);
  std::memcpy(host.data() + at_w, pos_weight().data(), b_w);
  std::memcpy(host.data() + at_cos, rope_cos().data(), b_rot);
  std::memcpy(host.data() + at_sin, rope_sin().data(), b_rot);
  auto* p = static_cast<unsigned char*>(ctx.malloc_device(total, "a vision plan"));
  storage_ = std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
  cudaStream_t s = ctx.stream();
  ops::check_cuda(cudaMemcpyAsync(p, host.data(), total, cudaMemcpyHostToDevice, s), "plan_vision: cudaMemcpy");
  ops::check_cuda(cudaStreamSynchronize(s), "plan_vision");
  d_offsets = reinterpret_cast<const int64_t*>(p);
  d_pos_index = reinterpret_cast<const int32_t*>(p + at_idx);
  d_pos_weight = reinterpret_cast<const float*>(p + at_w);
  d_cos = reinterpret_cast<const float*>(p + at_cos);
  d_sin = reinterpret_cast<const float*>(p + at_sin);
}

}  // namespace ds::cuda
