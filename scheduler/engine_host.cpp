// The prefix cache's host tier in the engine's steps (engine_core.h; scheduler.h, "Host
// tier"): offloads before device memory is reused, loads beside the steps, and the sequences
// that wait on them.
#include <algorithm>
#include <exception>
#include <set>
#include <spdlog/spdlog.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "scheduler/engine_core.h"

namespace ds::scheduler {

void Engine::Core::finish_loads() {
  if (!host_cache_) return;
  service_disk(false);
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
  if (disk_) {
    // Written once the copies are done (service_disk); pinned until then, so that neither a
    // store nor a load rewrites the slots meanwhile. A slot stored twice in one flush holds
    // the later entry: written once.
    std::vector<DiskTier::Job> jobs;
    std::set<int32_t> blocks_seen, states_seen;
    for (const kvcache::BlockTransfer& b : o.blocks) {
      if (!blocks_seen.insert(b.host).second) continue;
      kvcache::HostCache::BlockInfo info = host_cache_->block_info(b.host);
      host_cache_->pin(std::span<const kvcache::HostBlockId>(&b.host, 1), -1);
      DiskTier::Job& j = jobs.emplace_back();
      j.entry = {kvcache::DiskEntryKind::block, disk_fingerprint_, info.key, info.check, info.parent,
                 blocks_.block_size(), std::move(info.tokens), {}};
      j.host_id = b.host;
    }
    for (const kvcache::StateTransfer& s : o.states) {
      if (!states_seen.insert(s.host).second) continue;
      const auto [key, check] = host_cache_->snapshot_info(s.host);
      host_cache_->pin({}, s.host);
      DiskTier::Job& j = jobs.emplace_back();
      j.entry = {kvcache::DiskEntryKind::snapshot, disk_fingerprint_, key, check, 0, blocks_.block_size(), {}, {}};
      j.host_id = s.host;
    }
    pending_writes_.emplace_back(ticket, std::move(jobs));
  }
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

void Engine::Core::open_disk() {
  kvcache::DiskEntryExpect x;
  x.block_size = blocks_.block_size();
  x.block_bytes = host_tier_.block_bytes;
  x.state_bytes = host_tier_.state_bytes;
  // The checkpoint's fingerprint (the composition root's) with the entries' layout.
  const int32_t layout[] = {x.block_size, static_cast<int32_t>(x.block_bytes), static_cast<int32_t>(x.block_bytes >> 32),
                            static_cast<int32_t>(x.state_bytes), static_cast<int32_t>(x.state_bytes >> 32)};
  x.fingerprint = disk_fingerprint_ = kvcache::chain_key(config_.host_disk_fingerprint, layout);
  DiskTier::Options o;
  o.dir = config_.host_disk_dir;
  o.expect = x;
  o.max_bytes = counters_.host_cache_capacity_bytes;  // what a restart can read back
  disk_ = std::make_unique<DiskTier>(o, [this](kvcache::DiskEntryKind kind, int32_t id, std::span<uint8_t> out) {
    model_.read_host_entry(kind, id, out);
  });
  disk_->load([this](kvcache::DiskEntry&& e) {
    if (e.kind == kvcache::DiskEntryKind::block) {
      if (auto id = host_cache_->store_block(e.key, e.check, e.parent, e.tokens))
        model_.write_host_entry(e.kind, *id, e.payload);
    } else if (auto id = host_cache_->store_snapshot(e.key, e.check)) {
      model_.write_host_entry(e.kind, *id, e.payload);
    }
  });
  const DiskTier::Stats s = disk_->stats();
  spdlog::info("disk tier: {} read {} entries back into the host tier ({} refused)", config_.host_disk_dir,
               s.files_loaded, s.files_refused);
}

void Engine::Core::service_disk(bool wait) {
  if (!disk_) return;
  while (!pending_writes_.empty()) {
    auto& [ticket, jobs] = pending_writes_.front();
    if (wait)
      model_.wait_transfer(ticket);
    else if (!model_.transfer_done(ticket))
      break;
    disk_->write(std::move(jobs));
    pending_writes_.erase(pending_writes_.begin());
  }
  if (wait) disk_->drain();
  for (const DiskTier::Job& j : disk_->take_done()) {
    if (j.entry.kind == kvcache::DiskEntryKind::block)
      host_cache_->unpin(std::span<const kvcache::HostBlockId>(&j.host_id, 1), -1);
    else
      host_cache_->unpin({}, j.host_id);
  }
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
