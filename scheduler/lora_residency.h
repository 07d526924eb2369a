// LoraResidency: which LoRA adapter each of the model's adapter slots holds, and how many
// running sequences pin it (the bookkeeping half of serve --max-loras; the weights live in the
// model's slot pool, model/qwen35/lora_slots.h).
//
// Adapters are named by ids the server never reuses (a reloaded adapter gets a new one), so a
// slot holding an id holds exactly that adapter's weights. A running sequence with an adapter
// pins its slot; an unpinned slot keeps its adapter (a later request hits it) until it is the
// least recently used one a new adapter needs. pin() says when the slot must be loaded first.
//
// Not thread-safe: the scheduler owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace ds::scheduler {

using LoraId = uint64_t;  // 0 = none (the base model)

class LoraResidency {
 public:
  explicit LoraResidency(int32_t num_slots = 0);

  int32_t num_slots() const { return static_cast<int32_t>(slots_.size()); }
  // Whether `id` can be pinned now: it is resident, or some slot is unpinned.
  bool can_pin(LoraId id) const;
  struct Pin {
    int32_t slot = -1;
    bool load = false;  // the slot held something else: load the adapter before the step runs
  };
  // Pins id's slot, taking a free slot or the least recently used unpinned one when id is not
  // resident. std::logic_error when !can_pin(id).
  Pin pin(LoraId id);
  void unpin(int32_t slot);
  // The slot's adapter is gone (its load failed): the slot is free again once unpinned.
  void invalidate(int32_t slot);
  std::optional<int32_t> slot_of(LoraId id) const;
  int32_t pins(int32_t slot) const { return slots_[static_cast<size_t>(slot)].pins; }
  int32_t num_pinned() const;  // slots with pins

 private:
  struct Slot {
    LoraId id = 0;
    int32_t pins = 0;
    uint64_t last_use = 0;
  };
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
};

}  // namespace ds::scheduler
