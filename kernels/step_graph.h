// Recorded steps: a device backend records the ops of one forward step once (CUDA graphs) and
// replays the recording for later steps of the same shape, so a small step pays one launch
// instead of one per op (docs/bench-log, "CUDA graphs").
//
// A recording fixes every kernel's grid and every address it reads, so only steps whose shape
// is one of a few are recorded: every sequence brings the same number of new tokens (a
// decode token, or a verify chunk of K + 1), the batch is padded up to the next recorded
// batch size (step_graph_batch), and everything that varies from step to step -- token ids,
// positions, K/V slots, block tables (of one fixed width), sequence lengths, state slots --
// is read by the kernels from the plan's device copy, which lands at the same addresses for
// the same shape (kernels/batch_plan.h, BatchDesc::table_blocks and n_padding). The model
// decides which steps are recorded (model/qwen35/model.h, Model::enable_step_graphs); the
// backend only records and replays (Backend::begin_recording).
#pragma once

#include <cstdint>
#include <vector>

namespace ds::kernels {

// A recording, opaque outside the backend that made it.
class StepGraph {
 public:
  virtual ~StepGraph() = default;
};

// The longest chunk a recorded step may give each sequence (speculative decoding's K + 1 for
// K <= 7): longer chunks run eagerly.
inline constexpr int64_t kStepGraphMaxChunk = 8;
// The largest recorded batch (sequences).
inline constexpr int32_t kStepGraphMaxBatch = 512;

// Recorded batch sizes up to max_seqs (and kStepGraphMaxBatch), ascending: 1, 2, 4, then
// multiples of 8 up to 256 and of 16 beyond (vLLM's capture sizes), and max_seqs itself
// when it falls between two.
inline std::vector<int32_t> step_graph_batches(int32_t max_seqs) {
  std::vector<int32_t> out;
  const int32_t top = max_seqs < kStepGraphMaxBatch ? max_seqs : kStepGraphMaxBatch;
  for (int32_t b = 1; b <= top; b = b < 4 ? 2 * b : (b < 8 ? 8 : (b < 256 ? b + 8 : b + 16))) out.push_back(b);
  if (top >= 1 && out.back() != top) out.push_back(top);
  return out;
}

// The recorded batch a step of n_seqs sequences pads to (the smallest size >= n_seqs), or 0
// when it is larger than any (it runs eagerly).
inline int32_t step_graph_batch(int32_t n_seqs, int32_t max_seqs) {
  if (n_seqs < 1) return 0;
  for (int32_t b : step_graph_batches(max_seqs))
    if (b >= n_seqs) return b;
  return 0;
}

// The table width (blocks) of a recorded step whose longest sequence holds `longest` tokens:
// the smallest of 64, 128, 256, ... blocks that covers it, at most max_blocks (0 when even
// that is too narrow). Each width is a shape of its own: the plan uploads full rows and the
// decode attention is planned for them, so a width within 2x of the longest sequence keeps
// both near what an eager step would do, while a running batch changes width rarely.
inline int32_t step_table_blocks(int64_t longest, int32_t block_size, int32_t max_blocks) {
  const int64_t need = (longest + block_size - 1) / block_size;
  if (need > max_blocks) return 0;
  int64_t w = 64;
  while (w < need) w *= 2;
  return static_cast<int32_t>(w < max_blocks ? w : max_blocks);
}

}  // namespace ds::kernels
