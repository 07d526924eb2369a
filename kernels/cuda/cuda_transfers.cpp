#include "kernels/cuda/cuda_transfers.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"

namespace ds::cuda {

CudaTransfers::CudaTransfers(int device, cudaStream_t compute) : device_(device), compute_(compute) {
  ops::check_cuda(cudaSetDevice(device_), "transfers: cudaSetDevice");
  ops::check_cuda(cudaStreamCreateWithFlags(&offloads_.stream, cudaStreamNonBlocking), "transfers: cudaStreamCreate");
  ops::check_cuda(cudaStreamCreateWithFlags(&loads_.stream, cudaStreamNonBlocking), "transfers: cudaStreamCreate");
  ops::check_cuda(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming), "transfers: cudaEventCreate");
}

CudaTransfers::~CudaTransfers() {
  for (Direction* d : {&offloads_, &loads_}) {
    if (d->stream) cudaStreamSynchronize(d->stream);
    for (auto& [seq, ev] : d->pending) cudaEventDestroy(ev);
    if (d->stream) cudaStreamDestroy(d->stream);
  }
  for (cudaEvent_t e : spare_) cudaEventDestroy(e);
  if (compute_done_) cudaEventDestroy(compute_done_);
}

std::shared_ptr<void> CudaTransfers::alloc_pinned(int64_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, static_cast<size_t>(bytes), cudaHostAllocDefault);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error("cuda backend: cannot pin " + std::to_string(bytes >> 20) +
                             " MiB of host memory for the host tier: " + cudaGetErrorString(e));
  }
  return std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); });
}

cudaEvent_t CudaTransfers::event() {
  if (!spare_.empty()) {
    cudaEvent_t e = spare_.back();
    spare_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  ops::check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "transfers: cudaEventCreate");
  return e;
}

uint64_t CudaTransfers::issue(std::span<const kernels::Backend::HostCopy> copies, bool to_host) {
  Direction& d = to_host ? offloads_ : loads_;
  ops::check_cuda(cudaEventRecord(compute_done_, compute_), "transfers: cudaEventRecord");
  ops::check_cuda(cudaStreamWaitEvent(d.stream, compute_done_, 0), "transfers: cudaStreamWaitEvent");
  if (!to_host && last_offload_) {
    retire(offloads_, 0, false);
    if (offloads_.completed < offloads_.issued)
      ops::check_cuda(cudaStreamWaitEvent(d.stream, last_offload_, 0), "transfers: cudaStreamWaitEvent");
  }
  const cudaMemcpyKind kind = to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
  size_t i = 0;
  while (i < copies.size()) {
    auto* dev = static_cast<char*>(copies[i].device.data());
    auto* host = static_cast<char*>(copies[i].host);
    size_t n = static_cast<size_t>(copies[i].device.bytes());
    size_t j = i + 1;
    for (; j < copies.size(); ++j) {
      if (static_cast<char*>(copies[j].device.data()) != dev + n || static_cast<char*>(copies[j].host) != host + n) break;
      n += static_cast<size_t>(copies[j].device.bytes());
    }
    void* dst = to_host ? static_cast<void*>(host) : static_cast<void*>(dev);
    const void* src = to_host ? static_cast<const void*>(dev) : static_cast<const void*>(host);
    ops::check_cuda(cudaMemcpyAsync(dst, src, n, kind, d.stream), to_host ? "offload: cudaMemcpyAsync" : "load: cudaMemcpyAsync");
    i = j;
  }
  cudaEvent_t ev = event();
  ops::check_cuda(cudaEventRecord(ev, d.stream), "transfers: cudaEventRecord");
  const uint64_t seq = ++d.issued;
  d.pending.emplace_back(seq, ev);
  if (to_host) last_offload_ = ev;
  return (seq << 1) | (to_host ? 1u : 0u);
}

void CudaTransfers::retire(Direction& d, uint64_t upto, bool blocking) {
  while (!d.pending.empty()) {
    auto [seq, ev] = d.pending.front();
    if (blocking && seq <= upto) {
      ops::check_cuda(cudaEventSynchronize(ev), "transfers: a host copy failed");
    } else {
      const cudaError_t e = cudaEventQuery(ev);
      if (e == cudaErrorNotReady) {
        cudaGetLastError();
        break;
      }
      ops::check_cuda(e, "transfers: a host copy failed");
    }
    d.completed = seq;
    d.pending.pop_front();
    if (ev == last_offload_) last_offload_ = nullptr;
    spare_.push_back(ev);
  }
}

bool CudaTransfers::done(uint64_t ticket) {
  Direction& d = of(ticket);
  if ((ticket >> 1) <= d.completed) return true;
  retire(d, 0, false);
  return (ticket >> 1) <= d.completed;
}

void CudaTransfers::wait(uint64_t ticket) {
  Direction& d = of(ticket);
  if ((ticket >> 1) > d.completed) retire(d, ticket >> 1, true);
}

void CudaTransfers::order_after(uint64_t ticket) {
  Direction& d = of(ticket);
  if (done(ticket)) return;
  for (const auto& [seq, ev] : d.pending) {
    if (seq < (ticket >> 1)) continue;
    ops::check_cuda(cudaStreamWaitEvent(compute_, ev, 0), "transfers: cudaStreamWaitEvent");
    return;
  }
}

}  // namespace ds::cuda
