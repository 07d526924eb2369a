// The CUDA backend: the Backend interface (kernels/backend.h) on one NVIDIA GPU (sm_90a).
//
// Weights are uploaded once: matrices (the GEMM weights and the embedding table) in bf16, the
// small vectors and the conv filters in f32 (widened exactly); FP8 weights (fp8_weights())
// stay e4m3 with their f32 block scales, read by fp8_gemm.cu's decode kernels and
// dequantised to bf16 tiles for cuBLAS in larger steps; 4-bit weights (int4_weights()) stay
// codes with their group scales and zeros, read the same way by int4_gemm.cu (or kept as bf16
// values where its layout does not hold the shape). Activations are f32 except the GEMM
// inputs, which are bf16 (activation_dtype()), so the norms, the SwiGLU, the attention
// and the gated norm write what cuBLAS reads; GEMMs accumulate in fp32. K/V pools are bf16 by
// default, or f16, Q8_0 or Q4_0 (kv_dtype; ggml's 32-element blocks with an f16 scale, written
// by the K/V write as rows arrive, read directly by the decode kernel and widened to bf16 by
// the prefill path's gather); the DeltaNet state is fp32 in the model's slot arrays. Every op is queued on the backend's
// own stream; copies to the host wait for it.
//
// Errors: shapes and types are checked per op (std::invalid_argument naming the op); a CUDA or
// cuBLAS failure is std::runtime_error("cuda backend: <op or kernel>: ..."); an allocation the
// device cannot hold is a readable out-of-memory error with the free and total sizes.
// Kernel faults are asynchronous: they surface at the next synchronising call, unless
// sync_each_op (or DELTASERVE_CUDA_SYNC=1 in the environment, a debugging aid) makes every op
// wait, so the error names the op that faulted.
//
// Which kernel runs where is decided once, from these options and the device: the defaults
// are what production runs, and a benchmark that compares a path with the one it replaced
// passes options that force it (KernelPaths, DecodeOptions); nothing else steers them.
//
// f32_weights keeps the matrices in f32 and runs fp32 GEMMs with f32 activations, and the
// chunked delta rule in fp32 on the CUDA cores instead of bf16 tensor cores: the reference
// mode the GPU tests compare op by op and layer by layer with the CPU engine.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/cuda/paged_attention.h"

namespace ds::cuda {

struct CudaBackendOptions {
  int device = 0;
  bool f32_weights = false;
  // FP8 weights stay FP8 in device memory (about half of bf16's bytes; fp8_gemm.cu reads
  // them). false: the loader dequantises them to bf16 as for a bf16 checkpoint, which costs
  // the memory back but runs steps of more than 8-16 rows at bf16's speed (see
  // docs/bench-log, "FP8 weights on the H200"). Ignored with f32_weights.
  bool fp8_weights = true;
  // 4-bit weights (GPTQ / AWQ checkpoints) stay 4-bit in device memory (int4_gemm.cu reads
  // them). false: the loader dequantises them to bf16 (the benchmarks' baseline of the same
  // weights in bf16). Ignored with f32_weights.
  bool int4_weights = true;
  bool sync_each_op = false;
  // Element type of both K/V pools: bf16, f16, q8_0 or q4_0 (the quantised types need a head
  // dim that is a multiple of 32). Anything else is refused by make_cuda_backend.
  DType kv_dtype = DType::bf16;
  // Backend::recurrent_state_dtype: f32 or bf16 (anything else is refused by make_cuda_backend).
  DType recurrent_state_dtype = DType::f32;

  struct KernelPaths {
    // Kernels chained as programmatic dependent launches (backend_common.cuh): each is
    // scheduled while the previous one drains.
    bool chained_launches = true;
    bool gemv = true;         // one-row GEMMs by the weight-streaming kernel (gemv.cu), else cuBLAS
    bool skinny_gemm = true;  // 2-8-row GEMMs by the tensor-core skinny kernel (skinny_gemm.cu), else cuBLAS
    // FP8-weight GEMMs of 2 to this many rows (at most ops::kSkinnyFp8MaxRows = 64) by the FP8
    // skinny kernel (fp8_gemm.cu; when skinny_gemm), larger ones by the block-scaled FP8 GEMM
    // (fp8_block_gemm) where it applies, else cuBLAS over the weight dequantised to bf16 tiles.
    // 8: from 16 rows the block-scaled GEMM decodes faster (docs/bench-log, "FP8 prefill on
    // block-scaled FP8 GEMMs").
    int64_t fp8_skinny_rows = 8;
    // One-row FP8 GEMMs (and the gate_up + SwiGLU) on that tensor-core kernel where K allows
    // (when gemv); false: the warp-per-row FP8 GEMV (docs/bench-log, "FP8 weights on the
    // H200": the A/B of the two).
    bool fp8_tensor_core_gemv = true;
    // FP8-weight GEMMs above fp8_skinny_rows (weights with 128 x 128 block scales, K a multiple
    // of 128) by cuBLASLt's block-scaled FP8 GEMM, the activations quantised per row and 128
    // columns (fp8_block_gemm.h); false: cuBLAS over the weight dequantised to bf16 tiles
    // (docs/bench-log, "FP8 prefill on block-scaled FP8 GEMMs": the A/B of the two).
    bool fp8_block_gemm = true;
    // Those block-scaled GEMMs of up to 64 rows on the tile shapes chosen for decode steps
    // (fp8_block_gemm.cpp, decode_tile); false: cuBLASLt's heuristic's choice.
    bool fp8_decode_tiles = true;
    // 4-bit-weight GEMMs of up to this many rows (at most ops::kSkinnyInt4MaxRows = 64) by
    // int4_gemm.cu's kernel, which reads the codes directly (one-row steps when gemv, the
    // others when skinny_gemm); larger ones by cuBLAS over the weight dequantised to bf16
    // tiles in scratch (choose_gemm decides; cuda_gemm_int4.cpp runs them).
    int64_t int4_skinny_rows = 64;
    // Backend::fused_projection_rows (0: never): steps this small run a layer's stacked
    // projections as one GEMM, which saves the launch latency of the small ones.
    int64_t fused_projection_rows = 128;
  } paths;
  // The paged decode kernel's options; its chained_launch follows paths.chained_launches.
  DecodeOptions decode;
};

// Throws std::runtime_error when no CUDA device is usable.
std::unique_ptr<kernels::Backend> make_cuda_backend(const CudaBackendOptions& options = {});

// Whether a CUDA device is present (for tests that skip without one).
bool cuda_device_available();

// The stream a CUDA backend queues its ops on (a cudaStream_t), for code that adds its own
// work to the same stream (the device sampler, benchmarks); throws std::invalid_argument for
// another backend.
void* backend_stream(kernels::Backend& backend);

}  // namespace ds::cuda
