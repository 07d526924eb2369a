// --search of bench_fp8_gemm: every configuration cuBLASLt accepts for the block-scaled FP8
// GEMM of one shape (algorithm id x tile x stages x split-K x cluster shape, each checked by
// cublasLtMatmulAlgoCheck), run once against the heuristic's output and timed with the L2
// flushed before every repetition (a decode step never finds its weight in the L2), so the
// heuristic's single offer for decode-sized M can be compared with the whole space.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ds::bench {

// w: [N, K] codes with [N/128][roundup(K/128, 4)] block scales; x: [M, K] codes with M-major
// per-128-column scales; out: room for M x N f32. Prints a line per accepted configuration
// among the fastest `top`, then a summary line; stops timing after budget_s seconds.
void fp8_algo_search(cudaStream_t stream, void* ws, size_t ws_bytes, const uint8_t* wc, const float* wsc,
                     const uint8_t* xc, const float* xsc, float* out, int64_t M, int64_t N, int64_t K, int reps,
                     int top, int budget_s);

}  // namespace ds::bench
