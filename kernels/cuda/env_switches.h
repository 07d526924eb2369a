// The CUDA backend's environment switches, each read once by the code it steers. They exist
// for in-call A/B comparisons (docs/benchmarks.md) and for debugging; production runs leave
// them unset:
//   DELTASERVE_CUDA_SYNC=1            every op waits for the device (faults name their op)
//   DELTASERVE_CUDA_PDL=0             plain launches instead of programmatic dependent ones
//   DELTASERVE_CUDA_GEMV=0            one-row GEMMs on cuBLAS instead of gemv.cu
//   DELTASERVE_CUDA_SKINNY_GEMM=0     2-8-row GEMMs on cuBLAS instead of skinny_gemm.cu
//   DELTASERVE_CUDA_FUSED_PROJECTION_ROWS=N   the stacked-projection threshold (0 = never)
//   DELTASERVE_CUDA_DECODE_TMA=0      decode K/V tiles by cp.async instead of bulk tensor copies
//   DELTASERVE_CUDA_DECODE_TOKEN_ROWS=0  decode never uses token-row tiles (a block per KV head)
//   DELTASERVE_CUDA_DECODE_BLOCKS_PER_SM=N  decode's resident blocks per SM at most N (1-3)
//   DELTASERVE_CUDA_DECODE_ROWS_L2_PROMOTION=N  L2 promotion of token-row boxes, bytes (0/64/128/256)
//
// Internal to kernels/cuda; plain C++.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace ds::cuda {

// "0" is off, any other non-empty value on; unset or empty gives `fallback`.
inline bool env_switch(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return std::string(v) != "0";
}

// A non-negative integer; unset or empty gives `fallback`.
inline int64_t env_count(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  const long long n = std::atoll(v);
  return n < 0 ? 0 : static_cast<int64_t>(n);
}

// DELTASERVE_CUDA_PDL, read once: whether kernels are chained as programmatic dependent
// launches (the backend's ops through ops::pdl_enabled, the decode merge directly).
inline bool pdl_switch() {
  static const bool on = env_switch("DELTASERVE_CUDA_PDL", true);
  return on;
}

}  // namespace ds::cuda
