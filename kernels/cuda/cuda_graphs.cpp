// CUDA graphs of recorded steps: capture, instantiation and launch, every call checked.
#include "kernels/cuda/cuda_graphs.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace ds::cuda {

CudaStepGraph::~CudaStepGraph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

void begin_step_capture(void* stream) {
  ops::check_cuda(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal),
                  "cudaStreamBeginCapture");
}

std::unique_ptr<CudaStepGraph> end_step_capture(void* stream, uint64_t epoch, std::string& why) {
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph);
  if (end != cudaSuccess || !graph) {
    cudaGetLastError();  // capture errors are not sticky: clear them for the eager run
    why = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(end);
    if (graph) cudaGraphDestroy(graph);
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiateWithFlags(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    cudaGetLastError();
    why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(inst);
    return nullptr;
  }
  return std::make_unique<CudaStepGraph>(exec, epoch);
}

void launch_step_graph(const CudaStepGraph& graph, void* stream) {
  ops::check_cuda(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph.exec()), static_cast<cudaStream_t>(stream)),
                  "cudaGraphLaunch");
}

}  // namespace ds::cuda
