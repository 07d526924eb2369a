// Instantiates the tensor-core decode kernel for one K type and every V type and head_dim
// (included once by each decode_tc_<K>.cu).
#pragma once

#include "kernels/cuda/decode_tc.cuh"

namespace ds::cuda::detail {

template <DType KT, DType VT, int D, bool ROWS>
void launch_tc_instance(const DecodeArgs& a, const TcMaps& maps, dim3 grid, int64_t smem, gpuStream_t stream,
                        bool chained) {
  gpu::launch(decode_tc_kernel<KT, VT, D, ROWS>, grid, dim3(kTcWarps * 32), static_cast<size_t>(smem), stream, chained,
              a, maps);
}

// Token-row tiles are their own instantiation, so the per-head one keeps its registers.
template <DType KT, DType VT>
TcEntry tc_entry_dim(int head_dim) {
  if (head_dim == 128)
    return {reinterpret_cast<const void*>(&decode_tc_kernel<KT, VT, 128, false>), &launch_tc_instance<KT, VT, 128, false>};
  if (head_dim == 256) {
    TcEntry e{reinterpret_cast<const void*>(&decode_tc_kernel<KT, VT, 256, false>),
              &launch_tc_instance<KT, VT, 256, false>};
    if constexpr (tc_rows_capable(KT, VT, 256)) {
      e.rows_symbol = reinterpret_cast<const void*>(&decode_tc_kernel<KT, VT, 256, true>);
      e.launch_rows = &launch_tc_instance<KT, VT, 256, true>;
    }
    return e;
  }
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
