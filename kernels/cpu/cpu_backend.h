// The CPU backend: float32 on the host, the project's reference engine.
//
// Weights are widened to f32 at upload (bf16 and f16 exactly), K/V pools are f32, the
// recurrent state f32 unless asked for bf16. GEMMs go
// through OpenBLAS (cblas_sgemm, its own threads); the other kernels are plain C++ written for
// the compiler to vectorise, and the ones with enough work (attention, the DeltaNet
// recurrence, the conv, norms over many rows) are split over a small thread pool.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/backend.h"

namespace ds::kernels::cpu {

struct CpuBackendOptions {
  // Threads for the non-GEMM kernels and for OpenBLAS; 0 = hardware concurrency.
  int num_threads = 0;
  // Backend::fused_projection_rows. The CPU engine gains nothing from fusing the stacked input
  // projections (0, the default); tests raise it to check the fused path a GPU takes against
  // the reference.
  int64_t fused_projection_rows = 0;
  // Backend::recurrent_state_dtype: f32 or bf16 (anything else is refused by make_cpu_backend).
  DType recurrent_state_dtype = DType::f32;
  // Backend::int4_weights: upload takes 4-bit weights (codes and groups) and widens them to f32
  // itself, where the loader otherwise dequantises them first: the same values either way.
  // Off by default; tests turn it on to check the loading path of a GPU that keeps them.
  bool int4_weights = false;
};

std::unique_ptr<Backend> make_cpu_backend(CpuBackendOptions options = {});

}  // namespace ds::kernels::cpu
