// The prefix cache's host tier in the engine's steps (engine_core.h; scheduler.h, "Host
// tier"): offloads before device memory is reused, loads beside the steps, and the sequences
// that wait on them.
#include <algorithm>
#include <exception>
#include <spdlog/spdlog.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "scheduler/engine_core.h"

namespace ds::scheduler {

void Engine::Core::finish_loads() {
  if (!host_cache_) return;
  std::vector<Sequence*> done;
  for (Sequence* s : scheduler_.running())
    if (s->loading && s->load_ticket != 0 && model_.transfer_done(s->load_ticket)) done.push_back(s);
  const auto now = Clock::now();
  for (Sequence* s : done) {
    if (auto it = load_started_.find(s->id); it != load_started_.end()) {
      const double t = seconds_between(it->second, now);
      const auto& bounds = EngineStats::kHostLoadSeconds;
      const size_t b = static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), t) - bounds.begin());
      ++counters_.host_load_buckets[b];
      ++counters_.host_loads_total;
      counters_.host_load_seconds_total += t;
      load_started_.erase(it);
    }
    scheduler_.load_done(*s);
  }
}

void Engine::Core::flush_offloads() {
  if (!host_cache_ || !prefix_cache_) return;
  const kvcache::Offloads o = prefix_cache_->take_offloads();
  if (o.empty()) return;
  // The device reuses the evicted blocks and snapshot slots in this step: its ops wait for the
  // copies (the host thread does not).
  uint64_t ticket = 0;
  try {
    ticket = model_.transfer_host(o.blocks, o.states, true);
  } catch (const std::exception& e) {
    // The host entries just stored hold nothing: the tier is not used again.
    spdlog::error("engine: copying evicted prefix-cache entries to the host tier failed ({}); the host tier is off "
                  "from now on",
                  e.what());
    prefix_cache_->drop_host();
    throw;
  }
  model_.order_after(ticket);
  counters_.host_cache_offload_bytes_total += static_cast<int64_t>(o.blocks.size()) * host_tier_.block_bytes +
                                              static_cast<int64_t>(o.states.size()) * host_tier_.state_bytes;
}

void Engine::Core::start_loads(const StepPlan& plan) {
  if (plan.loads.empty()) return;
  std::vector<kvcache::BlockTransfer> blocks;
  std::vector<kvcache::StateTransfer> states;
  for (const HostLoad& l : plan.loads) {
    blocks.insert(blocks.end(), l.blocks.begin(), l.blocks.end());
    states.insert(states.end(), l.states.begin(), l.states.end());
  }
  uint64_t ticket = 0;
  try {
    ticket = model_.transfer_host(blocks, states, false);
  } catch (const std::exception& e) {
    // Nothing was queued: these requests end here (their blocks and pins go back).
    counters_.last_error = e.what();
    spdlog::error("engine: loading {} prefix-cache hits from the host tier failed: {}", plan.loads.size(), e.what());
    std::vector<RequestId> ids;
    for (const HostLoad& l : plan.loads) ids.push_back(l.seq->id);
    for (RequestId id : ids) fail_request(id, std::string("host tier load failed: ") + e.what());
    return;
  }
  const auto now = Clock::now();
  for (const HostLoad& l : plan.loads) {
    l.seq->load_ticket = ticket;
    load_started_[l.seq->id] = now;
  }
  counters_.host_cache_load_bytes_total += static_cast<int64_t>(blocks.size()) * host_tier_.block_bytes +
                                           static_cast<int64_t>(states.size()) * host_tier_.state_bytes;
}

bool Engine::Core::wait_for_a_load() {
  for (Sequence* s : scheduler_.running()) {
    if (s->loading && s->load_ticket != 0) {
      model_.wait_transfer(s->load_ticket);
      return true;
    }
  }
  return false;
}

}  // namespace ds::scheduler
