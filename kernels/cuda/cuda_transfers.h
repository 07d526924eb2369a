// CudaTransfers: the CUDA backend's host transfers (kernels/backend.h, "host transfers"):
// page-locked host memory, and copies between it and device tensors on two copy streams of
// their own (device -> host offloads, host -> device loads), so that a load of a long prefix
// runs beside the compute stream's steps instead of in front of them.
//
// Order: a batch of copies first waits for everything queued on the compute stream (what it
// reads or overwrites was written there); a load batch also waits for the offloads queued
// before it (it may read host bytes they write). A ticket is an event recorded after its
// batch; tickets encode their direction in the low bit, and complete in order within a
// direction. order_after makes the compute stream wait for a ticket's event (the host does not
// block). Adjacent copies whose device and host ranges both continue the previous one are
// merged into one cudaMemcpyAsync (consecutive blocks of one pool, consecutive host slots).
//
// Internal to kernels/cuda. Not thread-safe: one engine thread drives a backend.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "kernels/backend.h"

namespace ds::cuda {

class CudaTransfers {
 public:
  CudaTransfers(int device, cudaStream_t compute);
  ~CudaTransfers();
  CudaTransfers(const CudaTransfers&) = delete;
  CudaTransfers& operator=(const CudaTransfers&) = delete;

  std::shared_ptr<void> alloc_pinned(int64_t bytes);
  uint64_t issue(std::span<const kernels::Backend::HostCopy> copies, bool to_host);
  bool done(uint64_t ticket);
  void wait(uint64_t ticket);
  void order_after(uint64_t ticket);

 private:
  struct Direction {
    cudaStream_t stream = nullptr;
    uint64_t issued = 0;     // tickets handed out (sequence numbers)
    uint64_t completed = 0;  // every ticket up to this one is done
    std::deque<std::pair<uint64_t, cudaEvent_t>> pending;  // in order
  };
  Direction& of(uint64_t ticket) { return (ticket & 1) ? offloads_ : loads_; }
  // Retires the completed events at the front; blocking waits for `upto` first.
  void retire(Direction& d, uint64_t upto, bool blocking);
  cudaEvent_t event();

  int device_;
  cudaStream_t compute_;
  cudaEvent_t compute_done_ = nullptr;  // recorded on the compute stream before each batch
  Direction offloads_, loads_;
  cudaEvent_t last_offload_ = nullptr;  // the latest offload batch's event, while pending
  std::vector<cudaEvent_t> spare_;
};

}  // namespace ds::cuda
