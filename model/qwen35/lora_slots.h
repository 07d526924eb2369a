// LoraSlots: the model's pool of adapter slots in backend memory (what serve --max-loras sizes).
//
// Every (layer, target) an adapter may adapt (lora_adapter.h) is a site of rank R_t = max_rank *
// rank_factor. The sites of a layer that read the same input form a group, and a group keeps
// one stacked A pool, so that the forward runs one shrink for all of them (the shrinks are
// mostly fixed latency on a GPU, not bytes: bench-log 2026-12-07):
//   full attention: q_proj, k_proj, v_proj;  DeltaNet: in_proj_qkv, in_proj_z, in_proj_b,
//   in_proj_a;  every layer: gate_proj, up_proj;  alone: o_proj, out_proj, down_proj.
// Per group, A [slots, R_g, in] f32 with R_g the members' R_t summed, each member's rows at its
// rank offset (the sum of the R_t before it, in the order above); per site, B [slots, out, R_t]
// f32. A slot holds one adapter: a member's A rows past the adapter's rank, and the whole member
// where the adapter leaves that target alone, are zero, and so are its B (scale folded in)
// columns past the rank. The shrink of a group writes tmp [rows, R_g]; a member's expand reads
// its columns [rank_offset, rank_offset + R_t) (Backend::lora_expand's first_rank), and the
// group's members expand in one op (Backend::lora_expand_group: one launch on a GPU). The
// forward's rows pick their slot (kernels::SequenceChunk::lora_slot). Which slot holds which
// adapter is the engine's business (scheduler/lora_residency.h).
//
// Memory: slots * sum over layers and sites of (in + out) * R_t * 4 bytes (bytes()): a group's
// A holds exactly its members' A rows, so stacking costs nothing. The forward's shrink output is
// rows * max_group_rank() floats.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "model/qwen35/config.h"
#include "model/qwen35/lora_adapter.h"

namespace ds::qwen35 {

class LoraSlots {
 public:
  // The sites of one layer that read one input.
  struct Group {
    kernels::Tensor a;  // [slots, R_g, in]
  };
  struct Site {
    int32_t group = -1;       // its Group (group())
    int64_t rank_offset = 0;  // its rows of the group's A, its columns of the shrink's output
    int64_t rank = 0;         // R_t
    kernels::Tensor b;        // [slots, out, R_t]
    std::vector<bool> used;   // per slot: its adapter adapts this site
  };

  LoraSlots(kernels::Backend& backend, const ModelConfig& config, int32_t num_slots, int64_t max_rank);

  int32_t num_slots() const { return num_slots_; }
  int64_t max_rank() const { return max_rank_; }
  int64_t bytes() const { return bytes_; }
  // The largest R_g (the shrink output's width).
  int64_t max_group_rank() const { return max_group_rank_; }
  // Copies the adapter into the slot, replacing what it held. Throws std::invalid_argument for
  // a slot out of range or an adapter made for another model or rank (load_lora_adapter checks
  // both; this guards the pool).
  void install(int32_t slot, const LoraAdapter& adapter);
  // Zeroes the slot.
  void clear(int32_t slot);
  // The site of (layer, target), or null where that layer has no such projection.
  const Site* site(int64_t layer, LoraTarget t) const;
  const Group& group(const Site& s) const { return groups_[static_cast<size_t>(s.group)]; }

 private:
  Site* mutable_site(int64_t layer, LoraTarget t);
  // The site's rows of the slot's A in its group's pool: [R_t, in].
  kernels::Tensor site_a(const Site& s, int32_t slot) const;

  kernels::Backend& backend_;
  ModelConfig config_;
  int32_t num_slots_;
  int64_t max_rank_;
  int64_t max_group_rank_ = 0;
  int64_t bytes_ = 0;
  std::vector<Group> groups_;
  std::vector<Site> sites_;  // [layer * kNumLoraTargets + target]; group -1 where absent
};

}  // namespace ds::qwen35
