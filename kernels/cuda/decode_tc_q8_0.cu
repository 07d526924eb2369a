// Tensor-core decode kernels with q8_0 K pools (all V types, head_dim 128 and 256).
#include "kernels/cuda/decode_tc_dispatch.cuh"

namespace ds::cuda::detail {
template TcEntry tc_entry_for<DType::q8_0>(DType v_type, int head_dim);
}  // namespace ds::cuda::detail
