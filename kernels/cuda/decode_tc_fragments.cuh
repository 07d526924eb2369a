// The tensor-core decode kernel's fragment helpers (decode_tc.cuh): the hi + lo split of an
// fp32 pair into operand halves, rounding by the FP32 magic constant, and where each fragment
// element sits along head_dim; with the PTX wrappers they build on (cp_async.cuh,
// mma_sync.cuh, ex2_approx.cuh). NVIDIA sm_80+ only (included under DS_GPU_HAS_MMA_SM80).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/ex2_approx.cuh"
#include "kernels/cuda/mma_sync.cuh"
#include "kernels/dtype.h"

namespace ds::cuda::detail {

// Round to nearest (even) of |x| < 2^22 by one FP32 add: x + 1.5 * 2^23 keeps the rounded
// integer in its low mantissa bits. rintf and float-to-int conversions run on the SM's
// quarter-rate unit, and q's two digits per element made them a visible part of every
// quantised block's start-up (all warps of an SM converting at once; docs/bench-log,
// "decode start-up and the merge kernel").
constexpr float kRoundMagic = 12582912.f;
__device__ __forceinline__ float round_magic(float x) { return __fadd_rn(x, kRoundMagic); }
__device__ __forceinline__ int magic_int(float t) { return __float_as_int(t) - 0x4B400000; }

// x0, x1 -> hi + lo pairs of the operand type (element 0 in the low half).
template <bool F16>
__device__ __forceinline__ void split_pair(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  if constexpr (F16) {
    const __half2 h = __floats2half2_rn(x0, x1);
    const float2 hf = __half22float2(h);
    const __half2 l = __floats2half2_rn(x0 - hf.x, x1 - hf.y);
    hi = *reinterpret_cast<const uint32_t*>(&h);
    lo = *reinterpret_cast<const uint32_t*>(&l);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
    const float2 hf = __bfloat1622float2(h);
    const __nv_bfloat162 l = __floats2bfloat162_rn(x0 - hf.x, x1 - hf.y);
    hi = *reinterpret_cast<const uint32_t*>(&h);
    lo = *reinterpret_cast<const uint32_t*>(&l);
  }
}

// head_dim index of the k-th column (0..15) of k-step s of the QK product for bf16/f16 K
// (quantised K: q_k_dim in decode_tc_quant.cuh).
__device__ __forceinline__ int k_dim(int s, int kk) { return 16 * s + kk; }
// head_dim index of row rho (0..15) of m-tile i of the PV product (O^T rows).
template <DType VT>
__device__ __forceinline__ int v_dim(int i, int rho) {
  if constexpr (VT == DType::q8_0)
    return 32 * (i >> 1) + 4 * (rho & 7) + 2 * (i & 1) + (rho >> 3);
  else if constexpr (VT == DType::q4_0)
    return 32 * (i >> 1) + 16 * (i & 1) + 2 * (rho & 7) + (rho >> 3);
  else
    return 16 * i + rho;
}


}  // namespace ds::cuda::detail
