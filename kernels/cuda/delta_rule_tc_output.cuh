// The output pass of the tensor-core chunked delta rule (delta_rule_tc.cuh), when the scan
// does not fold it in: one block per (chunk, value head), O = e^gamma (Q S) + P V' from the
// chunk's scratch (Q and P from prepare, the state before the chunk and V' from the scan).
// Included by delta_rule_tc.cu only.
#pragma once

#include <cstdint>

#include "kernels/cuda/delta_rule_tc_fragments.cuh"

namespace ds::cuda::ops::delta {
namespace {

struct OutputSmem {
  uint8_t* Qs;  // [C][D] swizzled, as in scratch
  uint8_t* Ps;  // [C][C] swizzled
  uint8_t* Sn;  // [D][kRowD]
  uint8_t* Vn;  // [C][kRowD]
  __device__ __forceinline__ explicit OutputSmem(uint8_t* smem)
      : Qs(smem), Ps(Qs + kC * kD * 2), Sn(Ps + kC * kC * 2), Vn(Sn + kD * kRowD) {}
};

// Q (the key head's, in its owner's slot), P, the state and V' of the chunk's scratch `src`
// into shared memory. Ends with a barrier.
__device__ __forceinline__ void load_output_tiles(const OutputSmem& sm, const uint8_t* src, const uint8_t* owner) {
  copy_rows(smem_addr(sm.Qs), kD * 2, owner + kOffQ, kD * 2, kC, kD * 2);
  copy_rows(smem_addr(sm.Ps), kC * 2, src + kOffP, kC * 2, kC, kC * 2);
  copy_rows(smem_addr(sm.Sn), kRowD, src + kOffS, kD * 2, kD, kD * 2);
  copy_rows(smem_addr(sm.Vn), kRowD, src + kOffVn, kD * 2, kC, kD * 2);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
}

// Warp w: tokens 16 (w % 4) .., columns 64 (w / 4) .. + 63 of value head j's output.
__device__ __forceinline__ void output_rows(const DeltaNetArgs& a, const DeltaNetChunkItem& it, int j,
                                            const OutputSmem& sm, const uint8_t* src) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int mt = warp & 3, n0 = 64 * (warp >> 2), g = lane >> 2, c = lane & 3;
  float o[8][4];
#pragma unroll
  for (int n = 0; n < 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  const uint32_t q_base = smem_addr(sm.Qs), p_base = smem_addr(sm.Ps), s_base = smem_addr(sm.Sn),
                 v_base = smem_addr(sm.Vn);
  mma_rows_by_64<true>(o, q_base, kD * 2, 16 * mt, s_base, kRowD, n0, kD / 16);  // Q S over dk
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // its rows scaled by e^gamma
    const float eg = reinterpret_cast<const float*>(src + kOffEg)[16 * mt + g + 8 * h];
#pragma unroll
    for (int n = 0; n < 8; ++n) o[n][2 * h] *= eg, o[n][2 * h + 1] *= eg;
  }
  mma_rows_by_64<true>(o, p_base, kC * 2, 16 * mt, v_base, kRowD, n0, mt + 1);  // P V' over tokens <= the rows' (P is lower)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = 16 * mt + g + 8 * h;
    if (i >= it.len) continue;
    float* dst = a.out + ((static_cast<int64_t>(it.row0) + i) * a.v_heads + j) * kD + n0 + 2 * c;
#pragma unroll
    for (int n = 0; n < 8; ++n) *reinterpret_cast<float2*>(dst + 8 * n) = make_float2(o[n][2 * h], o[n][2 * h + 1]);
  }
}

}  // namespace
}  // namespace ds::cuda::ops::delta
