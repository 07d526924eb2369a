#include "scheduler/lora_residency.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ds::scheduler {

LoraResidency::LoraResidency(int32_t num_slots) : slots_(static_cast<size_t>(std::max(0, num_slots))) {}

std::optional<int32_t> LoraResidency::slot_of(LoraId id) const {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (id != 0 && slots_[i].id == id) return static_cast<int32_t>(i);
  return std::nullopt;
}

bool LoraResidency::can_pin(LoraId id) const {
  if (slot_of(id)) return true;
  for (const Slot& s : slots_)
    if (s.pins == 0) return true;
  return false;
}

LoraResidency::Pin LoraResidency::pin(LoraId id) {
  if (id == 0) throw std::logic_error("LoraResidency::pin: the base model has no slot");
  Pin p;
  if (auto s = slot_of(id)) {
    p.slot = *s;
  } else {
    // A free slot first, then the least recently used unpinned one.
    auto better = [&](const Slot& a, const Slot& b) {
      if ((a.id == 0) != (b.id == 0)) return a.id == 0;
      return a.last_use < b.last_use;
    };
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].pins != 0) continue;
      if (p.slot < 0 || better(slots_[i], slots_[static_cast<size_t>(p.slot)])) p.slot = static_cast<int32_t>(i);
    }
    if (p.slot < 0) throw std::logic_error("LoraResidency::pin: every slot is pinned");
    slots_[static_cast<size_t>(p.slot)].id = id;
    p.load = true;
  }
  Slot& s = slots_[static_cast<size_t>(p.slot)];
  ++s.pins;
  s.last_use = ++clock_;
  return p;
}

void LoraResidency::unpin(int32_t slot) {
  if (slot < 0 || slot >= num_slots() || slots_[static_cast<size_t>(slot)].pins <= 0)
    throw std::logic_error("LoraResidency::unpin: slot " + std::to_string(slot) + " is not pinned");
  Slot& s = slots_[static_cast<size_t>(slot)];
  --s.pins;
  s.last_use = ++clock_;
}

void LoraResidency::invalidate(int32_t slot) {
  if (slot >= 0 && slot < num_slots()) slots_[static_cast<size_t>(slot)].id = 0;
}

int32_t LoraResidency::num_pinned() const {
  int32_t n = 0;
  for (const Slot& s : slots_) n += s.pins > 0;
  return n;
}

}  // namespace ds::scheduler
