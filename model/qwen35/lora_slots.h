// LoraSlots: the model's pool of adapter slots in backend memory (what serve --max-loras sizes).
//
// For every (layer, target) an adapter may adapt (lora_adapter.h), one A pool
// [slots, R_t, in] and one B pool [slots, out, R_t] in f32, R_t = max_rank * rank_factor; a
// slot holds one adapter's A (zero rows past its rank) and B (scale folded in, zero columns
// past its rank), or zeros where the adapter leaves that target alone. The forward's rows pick
// their slot (kernels::SequenceChunk::lora_slot) and Backend::lora_shrink / lora_expand apply
// it. Which slot holds which adapter is the engine's business (scheduler/lora_residency.h); a
// target no slot of a step adapts is skipped.
//
// Memory: slots * sum over layers and targets of (in + out) * R_t * 4 bytes (bytes()).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "model/qwen35/config.h"
#include "model/qwen35/lora_adapter.h"

namespace ds::qwen35 {

class LoraSlots {
 public:
  struct Site {
    kernels::Tensor a;  // [slots, R_t, in]
    kernels::Tensor b;  // [slots, out, R_t]
    std::vector<bool> used;  // per slot: its adapter adapts this site
  };

  LoraSlots(kernels::Backend& backend, const ModelConfig& config, int32_t num_slots, int64_t max_rank);

  int32_t num_slots() const { return num_slots_; }
  int64_t max_rank() const { return max_rank_; }
  int64_t bytes() const { return bytes_; }
  // The largest R_t (the shrink output's width).
  int64_t max_site_rank() const { return max_site_rank_; }
  // Copies the adapter into the slot, replacing what it held. Throws std::invalid_argument for
  // a slot out of range or an adapter made for another model or rank (load_lora_adapter checks
  // both; this guards the pool).
  void install(int32_t slot, const LoraAdapter& adapter);
  // Zeroes the slot.
  void clear(int32_t slot);
  // The site of (layer, target), or null where that layer has no such projection.
  const Site* site(int64_t layer, LoraTarget t) const;

 private:
  Site* mutable_site(int64_t layer, LoraTarget t);

  kernels::Backend& backend_;
  ModelConfig config_;
  int32_t num_slots_;
  int64_t max_rank_;
  int64_t max_site_rank_ = 0;
  int64_t bytes_ = 0;
  std::vector<Site> sites_;  // [layer * kNumLoraTargets + target]; empty tensors where absent
};

}  // namespace ds::qwen35
