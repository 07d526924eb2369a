// The bf16 types and conversions of cuda_bf16.h that kernels/cuda/delta_rule_tc.cu uses, for the CPU
// emulation (tests/kernels_cuda_emu/gpu_emu.h).
#pragma once

#include "tests/kernels_cuda_emu/gpu_emu.h"

struct __nv_bfloat16 {
  uint16_t bits;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {emu::f32_to_bf16(f)}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) { return {__float2bfloat16_rn(lo), __float2bfloat16_rn(hi)}; }
inline float __bfloat162float(__nv_bfloat16 h) { return emu::bf16_to_f32(h.bits); }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {__bfloat162float(h.x), __bfloat162float(h.y)}; }
