// Recorded steps of the CUDA backend (kernels/step_graph.h) as CUDA graphs: the backend's
// stream is captured between begin and end, the graph instantiated once and launched on the
// same stream for each replay.
//
// A graph holds the addresses its kernels read: the plan's device buffer, the scratch slots,
// the decode attention's fixed work lists. The backend counts the reallocations of that
// memory (its "memory epoch"); a graph recorded at another epoch is stale and is not
// launched. Capture runs in thread-local mode: an op that synchronises or allocates while
// capturing fails the capture (and the op), which end() reports; the caller then runs the
// step eagerly.
//
// Internal to kernels/cuda.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/step_graph.h"

namespace ds::cuda {

class CudaStepGraph final : public kernels::StepGraph {
 public:
  CudaStepGraph(void* exec, uint64_t epoch) : exec_(exec), epoch_(epoch) {}
  ~CudaStepGraph() override;
  CudaStepGraph(const CudaStepGraph&) = delete;
  CudaStepGraph& operator=(const CudaStepGraph&) = delete;
  uint64_t epoch() const { return epoch_; }
  void* exec() const { return exec_; }  // a cudaGraphExec_t

 private:
  void* exec_;
  uint64_t epoch_;
};

// Starts capturing the stream (a cudaStream_t). Throws std::runtime_error naming the call.
void begin_step_capture(void* stream);
// Ends the capture and instantiates its graph, stamped with epoch; null with `why` set when
// the capture was invalidated (an op that cannot be captured) or instantiation failed. The
// stream is out of capture mode either way.
std::unique_ptr<CudaStepGraph> end_step_capture(void* stream, uint64_t epoch, std::string& why);
// Launches a graph on the stream. Throws std::runtime_error naming the call.
void launch_step_graph(const CudaStepGraph& graph, void* stream);

}  // namespace ds::cuda
