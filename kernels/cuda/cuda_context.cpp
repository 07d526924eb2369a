// CudaContext: stream, cuBLAS handle and scratch of the CUDA backend.
#include "kernels/cuda/cuda_context.h"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/bias_gemm.h"
#include "kernels/cuda/fp8_block_gemm.h"

namespace ds::cuda {
namespace {

constexpr size_t kCublasWorkspace = 32u << 20;

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

void check_cublas(cublasStatus_t st, const char* op, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuda backend: ") + op + ": " + what + " failed: " +
                             cublasGetStatusString(st));
}

CudaContext::CudaContext(int device, bool chained_launches) : device_(device), chained_(chained_launches) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw std::runtime_error(std::string("cuda backend: no CUDA device available (") +
                             (e != cudaSuccess ? cudaGetErrorString(e) : "no devices") + ")");
  }
  if (device < 0 || device >= count)
    throw std::invalid_argument("cuda backend: device " + std::to_string(device) + " outside the " +
                                std::to_string(count) + " present");
  ops::check_cuda(cudaSetDevice(device), "cudaSetDevice");
  ops::check_cuda(cudaDeviceGetAttribute(&n_sms_, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  ops::check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cublas(cublasCreate(&cublas_), "init", "cublasCreate");
  check_cublas(cublasSetStream(cublas_, stream_), "init", "cublasSetStream");
  cublas_workspace_ = malloc_device(kCublasWorkspace, "the cuBLAS workspace");
  check_cublas(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspace), "init", "cublasSetWorkspace");
  check_cublas(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH), "init", "cublasSetMathMode");
}

CudaContext::~CudaContext() {
  if (stream_) cudaStreamSynchronize(stream_);
  fp8_block_gemm_.reset();
  bias_gemm_.reset();
  for (void* p : scratch_)
    if (p) cudaFree(p);
  if (cublas_) cublasDestroy(cublas_);
  if (cublas_workspace_) cudaFree(cublas_workspace_);
  if (stream_) cudaStreamDestroy(stream_);
}

Fp8BlockGemm& CudaContext::fp8_block_gemm() {
  if (!fp8_block_gemm_) fp8_block_gemm_ = std::make_unique<Fp8BlockGemm>(stream_, cublas_workspace_, kCublasWorkspace);
  return *fp8_block_gemm_;
}

BiasGemm& CudaContext::bias_gemm() {
  if (!bias_gemm_) bias_gemm_ = std::make_unique<BiasGemm>(stream_, cublas_workspace_, kCublasWorkspace);
  return *bias_gemm_;
}

void* CudaContext::malloc_device(size_t bytes, const std::string& what) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 256 : bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // out of memory is not sticky: clear it so later calls work
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw std::runtime_error("cuda backend: out of device memory: " + what + " needs " + mib(bytes) + ", " +
                             mib(free_b) + " of " + mib(total_b) + " free (" + cudaGetErrorString(e) + ")");
  }
  return p;
}

void* CudaContext::scratch(Scratch s, size_t bytes) {
  const auto i = static_cast<size_t>(s);
  if (bytes <= scratch_size_[i] && scratch_[i]) return scratch_[i];
  // Kernels queued earlier may still read the old buffer.
  ops::check_cuda(cudaStreamSynchronize(stream_), "scratch growth (an earlier op failed)");
  ++scratch_reallocations_;
  if (scratch_[i]) cudaFree(scratch_[i]);
  scratch_[i] = nullptr;
  scratch_size_[i] = 0;
  const size_t want = bytes + bytes / 4;
  scratch_[i] = malloc_device(want, "scratch for an op");
  scratch_size_[i] = want;
  return scratch_[i];
}

int64_t CudaContext::scratch_bytes() const {
  size_t n = kCublasWorkspace;
  for (size_t b : scratch_size_) n += b;
  return static_cast<int64_t>(n);
}

}  // namespace ds::cuda
