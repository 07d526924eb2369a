// The entries (symbols and launchers, decode_launch.h) of the tensor-core decode kernels for
// one K type and every V type and head_dim; included once by each decode_tc_<K>.cu, and by
// decode_trace.cu for the traced instantiations.
#pragma once

#include "kernels/cuda/decode_tc.cuh"

namespace ds::cuda::detail {

template <DType KT, DType VT, int D, bool ROWS, bool TRACE>
void launch_tc_instance(const DecodeArgs& a, const TcMaps& maps, uint32_t grid_x, uint32_t grid_y, int64_t smem,
                        void* stream, bool chained) {
  const dim3 grid(grid_x, grid_y), block(kTcWarps * 32);
  const auto s = static_cast<gpuStream_t>(stream);
  if constexpr (ROWS)
    gpu::launch(decode_tc_token_rows_kernel<KT, VT, D, TRACE>, grid, block, static_cast<size_t>(smem), s, chained, a, maps);
  else
    gpu::launch(decode_tc_heads_kernel<KT, VT, D, TRACE>, grid, block, static_cast<size_t>(smem), s, chained, a, maps);
}

// Token-row tiles are their own kernel, so the per-head one keeps its registers.
template <DType KT, DType VT, int D, bool TRACE>
TcEntry tc_entry_of() {
  TcEntry e{reinterpret_cast<const void*>(&decode_tc_heads_kernel<KT, VT, D, TRACE>),
            &launch_tc_instance<KT, VT, D, false, TRACE>};
  if constexpr (tc_token_rows_capable(KT, VT, D)) {
    e.token_rows_symbol = reinterpret_cast<const void*>(&decode_tc_token_rows_kernel<KT, VT, D, TRACE>);
    e.launch_token_rows = &launch_tc_instance<KT, VT, D, true, TRACE>;
  }
  return e;
}

template <DType KT, DType VT>
TcEntry tc_entry_dim(int head_dim) {
  if (head_dim == 128) return tc_entry_of<KT, VT, 128, false>();
  if (head_dim == 256) return tc_entry_of<KT, VT, 256, false>();
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
