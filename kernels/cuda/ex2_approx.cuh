// PTX wrapper of the fast base-2 exponential (ex2.approx.ftz.f32), what the attention kernels'
// online softmax runs in (scores scaled by log2 e). Shared by paged decode and prefill.
#pragma once

namespace ds::cuda::detail {

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace ds::cuda::detail
