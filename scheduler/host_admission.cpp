// Host-tier admission (scheduler.h, "Host tier"): a hit that the host tier holds part of is
// admitted loading -- blocks and slot taken, the copies listed for the engine, no chunk --
// and joins the steps once the engine has seen them done.
#include <algorithm>

#include "scheduler/scheduler.h"

namespace ds::scheduler {

void Scheduler::pin_host(Sequence& s, const kvcache::PrefixHit& hit) {
  if (!hit.from_host()) return;
  cache_->host()->pin(hit.host_blocks, hit.host_snapshot);
  s.host_pins = hit.host_blocks;
  s.host_snapshot_pin = hit.host_snapshot;
}

void Scheduler::unpin_host(Sequence& s) {
  if (s.host_pins.empty() && s.host_snapshot_pin < 0) return;
  if (kvcache::HostCache* host = cache_->host()) host->unpin(s.host_pins, s.host_snapshot_pin);
  s.host_pins.clear();
  s.host_snapshot_pin = -1;
}

bool Scheduler::admit_from_host(Sequence& s, const kvcache::PrefixHit& hit) {
  const int32_t bs = blocks_.block_size();
  const auto n = static_cast<int32_t>(hit.host_blocks.size());
  std::optional<kvcache::Reservation> blocks = reserve_blocks(n);
  std::optional<kvcache::SlotHandle> slot = blocks ? slots_.acquire() : std::nullopt;  // zeroed
  if (blocks && !slot && reclaim_spare_slot()) slot = slots_.acquire();
  if (!slot) {
    // Neither or both, as any admission (the reservation rolls back as it goes out of scope).
    give_back_lookup(s);
    return false;
  }
  const size_t on_device = hit.blocks.size();
  blocks_.commit(*blocks, s.table);
  s.table.append_tokens(static_cast<int64_t>(n) * bs);
  s.num_computed = hit.tokens;
  s.snapshot_due = 0;
  s.device_hit = hit.device_tokens(bs);
  admit_prefix(s, hit, slot->id);
  HostLoad& load = plan_.loads.emplace_back();
  load.seq = &s;
  for (int32_t i = 0; i < n; ++i)
    load.blocks.push_back({s.table.blocks()[on_device + static_cast<size_t>(i)].id, hit.host_blocks[static_cast<size_t>(i)]});
  if (hit.host_snapshot >= 0) load.states.push_back({slot->id, hit.host_snapshot});
  ++host_hits_;
  host_hit_tokens_ += static_cast<int64_t>(n) * bs;
  s.slot = slot;
  pin_lora(s);  // its adapter's weights load beside its K/V (the step it joins applies them)
  s.state = SeqState::running;
  s.loading = true;
  s.load_ticket = 0;
  s.admission = ++next_admission_;
  waiting_.pop_front();
  running_.push_back(&s);
  plan_.admitted.push_back(&s);
  return true;
}

void Scheduler::load_done(Sequence& s) {
  if (!s.loading) return;
  s.loading = false;
  s.load_ticket = 0;
  unpin_host(s);
}

void Scheduler::abandon_load(Sequence& s) {
  unpin_host(s);
  if (s.load_ticket != 0 && load_fence_) load_fence_(s.load_ticket);
  // Blocks past the device part may not hold their K/V yet: not recorded in the cache.
  s.num_computed = std::min(s.num_computed, s.device_hit);
  s.table.truncate_tokens(s.num_computed);
  s.loading = false;
  s.load_ticket = 0;
}

int32_t Scheduler::num_loading() const {
  return static_cast<int32_t>(std::count_if(running_.begin(), running_.end(), [](const Sequence* s) { return s->loading; }));
}

}  // namespace ds::scheduler
