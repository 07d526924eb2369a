// Instantiates the tensor-core decode kernel for one K type and every V type and head_dim
// (included once by each decode_tc_<K>.cu).
#pragma once

#include "kernels/cuda/decode_tc.cuh"

namespace ds::cuda::detail {

template <DType KT, DType VT, int D>
void launch_tc_instance(const DecodeArgs& a, const TcMaps& maps, dim3 grid, int64_t smem, gpuStream_t stream,
                        bool chained) {
  gpu::launch(decode_tc_kernel<KT, VT, D>, grid, dim3(kTcWarps * 32), static_cast<size_t>(smem), stream, chained, a,
              maps);
}

template <DType KT, DType VT>
TcEntry tc_entry_dim(int head_dim) {
  if (head_dim == 128)
    return {reinterpret_cast<const void*>(&decode_tc_kernel<KT, VT, 128>), &launch_tc_instance<KT, VT, 128>};
  if (head_dim == 256)
    return {reinterpret_cast<const void*>(&decode_tc_kernel<KT, VT, 256>), &launch_tc_instance<KT, VT, 256>};
  return {};
}

template <DType KT>
TcEntry tc_entry_for(DType v_type, int head_dim) {
  switch (v_type) {
    case DType::bf16: return tc_entry_dim<KT, DType::bf16>(head_dim);
    case DType::f16: return tc_entry_dim<KT, DType::f16>(head_dim);
    case DType::q8_0: return tc_entry_dim<KT, DType::q8_0>(head_dim);
    case DType::q4_0: return tc_entry_dim<KT, DType::q4_0>(head_dim);
    default: return {};
  }
}

}  // namespace ds::cuda::detail
