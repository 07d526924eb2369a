// The time floor of a decode GEMM as one kernel launch sees it: a plain read of the weight's
// bytes (16-byte loads, several in flight a thread, a block per SM slot), so that a GEMM's time
// can be split into what any one launch reading those bytes pays (the launch, the first DRAM
// round trip, the tail) and what the GEMM's own structure adds.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace ds::bench {

// Queues a kernel on `stream` that reads `bytes` (a multiple of 16) from `p` and writes one
// word a block to `sink` (stream_read_sink_words of them), so that the loads are not
// optimised away.
void stream_read(const void* p, size_t bytes, unsigned* sink, int sm_count, cudaStream_t stream);

// Words `sink` must hold for stream_read on a GPU of sm_count SMs.
size_t stream_read_sink_words(int sm_count);

}  // namespace ds::bench
