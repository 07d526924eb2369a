// The cache budget of a model on a device backend (the server's --gpu-memory-utilization):
// the weights are loaded; one profiling forward of the largest step the engine will run
// (max_batched_tokens tokens of one sequence, up to max_logit_rows logit rows) grows the
// model's activation buffers (and, when loaded, the MTP module's over the same positions) and
// the backend's scratch to their largest, measured; what is
// left of utilization x device memory is the budget for K/V blocks and state slots
// (kvcache::size_pools splits it).
#pragma once

#include <cstdint>
#include <string>

#include "model/qwen35/model.h"

namespace ds::qwen35 {

struct DeviceBudget {
  int64_t total_bytes = 0;        // device memory
  int64_t in_use_bytes = 0;       // before profiling: weights, runtime, other processes
  int64_t activation_bytes = 0;   // grown by the profiling step
  int64_t budget_bytes = 0;       // for the caches
  std::string describe() const;   // one line for the start-up log
};

// Runs the profiling step on a temporary cache (the next allocate_cache replaces it). Throws
// std::runtime_error naming the sizes when nothing is left for the caches, and
// std::invalid_argument on a host backend (no device memory to size).
DeviceBudget measure_device_budget(Model& model, double utilization, int64_t max_batched_tokens,
                                   int32_t max_logit_rows, int32_t block_size);

}  // namespace ds::qwen35
