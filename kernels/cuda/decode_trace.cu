// The traced instantiations of the tensor-core decode kernels (decode_trace.h).
#include "kernels/cuda/decode_trace.h"

#include <stdexcept>

#include "kernels/cuda/decode_tc_dispatch.cuh"

namespace ds::cuda {
namespace {

detail::TcEntry traced_entry(DType k, DType v, int head_dim) {
  using detail::tc_entry_of;
  if (k != v || head_dim != 256) return {};
  switch (k) {
    case DType::bf16: return tc_entry_of<DType::bf16, DType::bf16, 256, true>();
    case DType::f16: return tc_entry_of<DType::f16, DType::f16, 256, true>();
    case DType::q8_0: return tc_entry_of<DType::q8_0, DType::q8_0, 256, true>();
    case DType::q4_0: return tc_entry_of<DType::q4_0, DType::q4_0, 256, true>();
    default: return {};
  }
}

}  // namespace

void paged_attention_decode_traced(const KvPoolView& pools, const DecodeQuery& query, DecodeWorkspace& ws,
                                   const DecodeOptions& opts, uint64_t* trace, void* stream) {
  const detail::TcEntry e = traced_entry(pools.k_type, pools.v_type, pools.head_dim);
  if (!e.symbol)
    throw std::invalid_argument("paged_attention_decode_traced: traced kernels exist for K and V of one type at "
                                "head_dim 256");
  if (!trace) throw std::invalid_argument("paged_attention_decode_traced: no stamp buffer");
  detail::decode_with(pools, query, ws, opts, e, trace, stream);
}

}  // namespace ds::cuda
