// Phase stamps of the tensor-core decode kernel, for the benchmark (bench_paged_attention
// --trace, bench/tools/decode_trace_report.py) and the GPU tests; library ds_decode_trace,
// which production code does not link.
//
// The traced instantiations are the production kernels compiled with their stamps (TRACE in
// decode_tc.cuh), for K and V of one type at head_dim 256 (the benchmark's geometry). Thread
// 0 of every block writes kTraceWords (decode_launch.h) uint64 stamps to
// trace[(item * grid_x + x) * kTraceWords ...], grid_x = the plan's
// DecodeLaunchConfig::blocks_per_item.
#pragma once

#include <cstdint>

#include "kernels/cuda/paged_attention.h"

namespace ds::cuda {

// paged_attention_decode through the traced kernels; throws std::invalid_argument for other
// types or head dims, or a plan made for the portable kernel.
void paged_attention_decode_traced(const KvPoolView& pools, const DecodeQuery& query, DecodeWorkspace& ws,
                                   const DecodeOptions& opts, uint64_t* trace, void* stream);

}  // namespace ds::cuda
