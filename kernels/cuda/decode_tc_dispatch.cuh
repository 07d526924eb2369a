// Instantiates the tensor-core decode kernel for one K type and every V type and head_dim
// (included once by each decode_tc_<K>.cu).
#pragma once

#include "kernels/cuda/decode_tc.cuh"

namespace ds::cuda::detail {

template <DType KT, DType VT, int D, int W>
void launch_tc_instance(const DecodeArgs& a, dim3 grid, int64_t smem, gpuStream_t stream, bool chained) {
  gpu::launch(decode_tc_kernel<KT, VT, D, W>, grid, dim3(W * 32), static_cast<size_t>(smem), stream, chained, a);
}

template <DType KT, DType VT, int D>
TcEntry tc_entry_warps(int warps) {
  if (warps == 1) return {reinterpret_cast<const void*>(&decode_tc_kernel<KT, VT, D, 1>), &launch_tc_instance<KT, VT, D, 1>};
  if (warps == 4) return {reinterpret_cast<const void*>(&decode_tc_kernel<KT, VT, D, 4>), &launch_tc_instance<KT, VT, D, 4>};
  return {};
}

template <DType KT, DType VT>
TcEntry tc_entry_dim(int head_dim, int warps) {
  if (head_dim == 128) return tc_entry_warps<KT, VT, 128>(warps);
  if (head_dim == 256) return tc_entry_warps<KT, VT, 256>(warps);
  return {};
}

template <DType KT>
TcEntry tc_entry_for(DType v_type, int head_dim, int warps) {
  switch (v_type) {
    case DType::bf16: return tc_entry_dim<KT, DType::bf16>(head_dim, warps);
    case DType::f16: return tc_entry_dim<KT, DType::f16>(head_dim, warps);
    case DType::q8_0: return tc_entry_dim<KT, DType::q8_0>(head_dim, warps);
    case DType::q4_0: return tc_entry_dim<KT, DType::q4_0>(head_dim, warps);
    default: return {};
  }
}

}  // namespace ds::cuda::detail
