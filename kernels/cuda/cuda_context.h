// CudaContext: what the CUDA backend's ops share -- the device, the stream every op is
// queued on (with whether its kernels chain as programmatic dependent launches), the cuBLAS handle (bound to that stream, with its own workspace), and grow-only
// scratch buffers (bf16 copies of GEMM inputs, prefill-attention tiles, DeltaNet chunk
// scratch) that ops reuse from step to step.
//
// Internal to kernels/cuda. Not thread-safe: one engine thread drives a backend.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/cuda/backend_ops.h"

namespace ds::cuda {

class BiasGemm;
class Fp8BlockGemm;

// Scratch slots (one buffer each; a slot's contents do not outlive the op that fills it).
enum class Scratch : int {
  gemm_input,   // x converted for a GEMM
  attn_partial,  // prefill attention: the partial outputs of a split key range
  gemm_weight,  // a tile of an FP8 weight dequantised to bf16 for cuBLAS
  fp8_activations,  // x quantised to e4m3 with its scales for the block-scaled FP8 GEMM
  deltanet_chunks,   // chunked DeltaNet scratch
  segment_operands,  // the vision attention's Q, K and V packed to bf16
  count
};

class CudaContext {
 public:
  CudaContext(int device, bool chained_launches);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  int n_sms() const { return n_sms_; }
  ops::Stream stream() const { return {stream_, chained_}; }
  cublasHandle_t cublas() const { return cublas_; }
  // cuBLASLt's block-scaled FP8 GEMM on this stream (created on first use; shares the cuBLAS
  // workspace, which the stream's order keeps from being used twice at once).
  Fp8BlockGemm& fp8_block_gemm();
  // cuBLASLt's bf16 GEMM with the bias epilogue, likewise.
  BiasGemm& bias_gemm();

  // At least `bytes` of device memory for slot s (contents undefined after growth).
  void* scratch(Scratch s, size_t bytes);
  // Bytes held by all scratch slots.
  int64_t scratch_bytes() const;
  // Bytes held by one slot (at least what its last request asked for).
  size_t scratch_size(Scratch s) const { return scratch_size_[static_cast<size_t>(s)]; }
  // How many times a scratch slot was reallocated (recorded steps hold its addresses).
  uint64_t scratch_reallocations() const { return scratch_reallocations_; }

  // cudaMalloc that throws a readable out-of-memory error naming `what` instead of failing
  // later with a CUDA fault.
  void* malloc_device(size_t bytes, const std::string& what);

 private:
  int device_;
  int n_sms_ = 0;
  bool chained_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  std::unique_ptr<Fp8BlockGemm> fp8_block_gemm_;
  std::unique_ptr<BiasGemm> bias_gemm_;
  std::array<void*, static_cast<size_t>(Scratch::count)> scratch_{};
  std::array<size_t, static_cast<size_t>(Scratch::count)> scratch_size_{};
  uint64_t scratch_reallocations_ = 0;
};

// Throws std::runtime_error("cuda backend: <op>: <what> failed: <cuBLAS status>").
void check_cublas(cublasStatus_t st, const char* op, const char* what);

}  // namespace ds::cuda
