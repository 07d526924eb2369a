// GPU runtime portability: lets the sources in kernels/cuda compile with nvcc or with hipcc.
//
// Include this instead of <cuda_runtime.h> in every .cu file of kernels/cuda. It maps the small
// subset of the runtime API those files use onto gpu* names, and defines DS_GPU_CUDA or
// DS_GPU_HIP. Code that needs NVIDIA-only instructions (mma.sync, ldmatrix, cp.async) is
// guarded with DS_GPU_HAS_MMA_SM80, which is set only when nvcc compiles device code for
// sm_80 or newer; everything else (the portable decode kernel, the merge, the K/V writes,
// the block-table scatter) is plain C++ device code that builds for both.
//
// DS_GPU_CHECK(expr) throws std::runtime_error naming the call, file and line when a runtime
// call fails; DS_GPU_CHECK_LAUNCH() does the same for the last kernel launch.
#pragma once

#include <stdexcept>
#include <string>

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#define DS_GPU_HIP 1
#include <hip/hip_runtime.h>

using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
using gpuEvent_t = hipEvent_t;
#define gpuSuccess hipSuccess
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMallocHost(p, n) hipHostMalloc((p), (n), hipHostMallocDefault)
#define gpuFreeHost hipHostFree
#define gpuMemcpy hipMemcpy
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuEventCreateWithFlags hipEventCreateWithFlags
#define gpuEventDisableTiming hipEventDisableTiming
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventDestroy hipEventDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuGetDevice hipGetDevice
#define gpuDeviceGetAttribute hipDeviceGetAttribute
#define gpuDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define gpuDevAttrMaxSharedMemoryPerBlockOptin hipDeviceAttributeSharedMemPerBlockOptin
#define gpuDevAttrMaxSharedMemoryPerMultiprocessor hipDeviceAttributeMaxSharedMemoryPerMultiprocessor
#define gpuDevAttrComputeCapabilityMajor hipDeviceAttributeComputeCapabilityMajor
#define gpuFuncSetAttribute hipFuncSetAttribute
#define gpuFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuGetLastError hipGetLastError
#define gpuGetErrorString hipGetErrorString

#else
#define DS_GPU_CUDA 1
#include <cuda_runtime.h>

using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
using gpuEvent_t = cudaEvent_t;
#define gpuSuccess cudaSuccess
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMallocHost cudaMallocHost
#define gpuFreeHost cudaFreeHost
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuEventCreateWithFlags cudaEventCreateWithFlags
#define gpuEventDisableTiming cudaEventDisableTiming
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventDestroy cudaEventDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuGetDevice cudaGetDevice
#define gpuDeviceGetAttribute cudaDeviceGetAttribute
#define gpuDevAttrMultiProcessorCount cudaDevAttrMultiProcessorCount
#define gpuDevAttrMaxSharedMemoryPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin
#define gpuDevAttrMaxSharedMemoryPerMultiprocessor cudaDevAttrMaxSharedMemoryPerMultiprocessor
#define gpuDevAttrComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define gpuFuncSetAttribute cudaFuncSetAttribute
#define gpuFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuGetLastError cudaGetLastError
#define gpuGetErrorString cudaGetErrorString

// The tensor-core decode kernel is compiled for NVIDIA sm_80+ only (host passes included, so
// the host side can refer to it; its device body is empty below sm_80).
#define DS_GPU_HAS_MMA_SM80 1
#endif

namespace ds::gpu {

[[noreturn]] inline void throw_error(gpuError_t err, const char* what, const char* file, int line) {
  throw std::runtime_error(std::string(what) + " failed: " + gpuGetErrorString(err) + " (" + file + ":" +
                           std::to_string(line) + ")");
}

inline void check(gpuError_t err, const char* what, const char* file, int line) {
  if (err != gpuSuccess) throw_error(err, what, file, line);
}

}  // namespace ds::gpu

#define DS_GPU_CHECK(expr) ::ds::gpu::check((expr), #expr, __FILE__, __LINE__)
#define DS_GPU_CHECK_LAUNCH() ::ds::gpu::check(gpuGetLastError(), "kernel launch", __FILE__, __LINE__)

// Programmatic dependent launch (CUDA sm_90; plain launches elsewhere). A kernel launched with
// `chained` may be scheduled while the previous kernel on the stream drains; before it reads
// anything that kernel (or any earlier one) writes it must run DS_GPU_WAIT_PREVIOUS(), which
// returns once the previous kernel has finished and its writes are visible (at once when
// there is nothing to wait for). DS_GPU_ALLOW_NEXT() lets the next chained kernel launch
// before this one ends.
// A kernel parameter whose address device code may take (a tensor map for bulk copies).
#if DS_GPU_HIP
#define DS_GRID_CONSTANT
#else
#define DS_GRID_CONSTANT __grid_constant__
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DS_GPU_WAIT_PREVIOUS() asm volatile("griddepcontrol.wait;\n" ::: "memory")
#define DS_GPU_ALLOW_NEXT() asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory")
#else
#define DS_GPU_WAIT_PREVIOUS() ((void)0)
#define DS_GPU_ALLOW_NEXT() ((void)0)
#endif

namespace ds::gpu {

// Launches the kernel, chained behind the previous kernel on the stream when `chained`, and
// returns the launch's error code (launch() below throws it).
template <typename... Params, typename... Args>
gpuError_t try_launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, gpuStream_t stream, bool chained,
                      Args... args) {
#if DS_GPU_HIP
  (void)chained;
  kernel<<<grid, block, smem, stream>>>(args...);
  return gpuGetLastError();
#else
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = chained ? 1 : 0;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
#endif
}

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, gpuStream_t stream, bool chained,
            Args... args) {
  DS_GPU_CHECK(try_launch(kernel, grid, block, smem, stream, chained, args...));
}

}  // namespace ds::gpu
