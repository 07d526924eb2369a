#include "kvcache/state_pool.h"

#include <string>

namespace ds::kvcache {

StatePool::StatePool(int32_t num_slots, StateLayout layout, ZeroFn zero)
    : layout_(layout), zero_(std::move(zero)) {
  if (num_slots <= 0) throw std::invalid_argument("StatePool: num_slots must be positive");
  live_.assign(static_cast<size_t>(num_slots), 0);
  generation_.assign(static_cast<size_t>(num_slots), 0);
  free_list_.reserve(static_cast<size_t>(num_slots));
  for (SlotId id = num_slots - 1; id >= 0; --id) free_list_.push_back(id);
}

std::optional<SlotHandle> StatePool::acquire() {
  if (free_list_.empty()) return std::nullopt;
  const SlotId id = free_list_.back();
  // Zero before handing the slot out: if zeroing throws, the slot stays free.
  if (zero_) zero_(id);
  free_list_.pop_back();
  live_[id] = 1;
  return SlotHandle{id, generation_[id]};
}

void StatePool::reset(SlotHandle h) {
  check_live(h, "reset");
  if (zero_) zero_(h.id);
}

void StatePool::release(SlotHandle h) {
  check_live(h, "release");
  live_[h.id] = 0;
  ++generation_[h.id];
  free_list_.push_back(h.id);
}

bool StatePool::is_live(SlotHandle h) const {
  return h.id >= 0 && h.id < num_slots() && live_[h.id] && generation_[h.id] == h.generation;
}

void StatePool::check_live(SlotHandle h, const char* what) const {
  if (h.id < 0 || h.id >= num_slots()) {
    throw StaleHandleError(std::string("StatePool::") + what + ": slot id " +
                           std::to_string(h.id) + " is out of range [0, " +
                           std::to_string(num_slots()) + ")");
  }
  if (!live_[h.id] || generation_[h.id] != h.generation) {
    throw StaleHandleError(std::string("StatePool::") + what + ": stale handle for slot " +
                           std::to_string(h.id) + " (generation " +
                           std::to_string(h.generation) + ", current " +
                           std::to_string(generation_[h.id]) + ")");
  }
}

}  // namespace ds::kvcache
