// Prefix-cache admission (scheduler.h, "Prefix caching"): the lookup at admission, branch
// points, the cache points a chunk stages or ends at, and what a completed chunk records.
#include <algorithm>
#include <utility>

#include "scheduler/scheduler.h"

namespace ds::scheduler {

bool Scheduler::look_up_prefix(Sequence& s, kvcache::PrefixHit& hit, int64_t& budget) {
  s.update_keys(blocks_.block_size());
  hit = cache_->lookup(s.cache_tokens(), s.keys, s.num_tokens() - 1, s.key_root);
  find_branch_points(s, hit, budget);
  if (s.deferred_steps < kMaxDeferredSteps && prefix_in_flight(s, hit.tokens)) {
    ++s.deferred_steps;
    return false;  // the prefix is being computed: take it from the cache in a step or two
  }
  cache_->use(hit, s.table);  // the hit's blocks are held (not evictable) from here on
  pin_host(s, hit);           // and its host entries (kept from the evictions its admission causes)
  return true;
}

void Scheduler::admit_prefix(Sequence& s, const kvcache::PrefixHit& hit, kvcache::SlotId slot) {
  prefix_queries_ += s.num_tokens();
  prefix_hits_ += hit.tokens;
  if (s.num_preemptions == 0) s.cached_tokens = hit.tokens;
  if (hit.snapshot >= 0) plan_.restores.push_back({hit.snapshot, slot});
  // Points the hit already covers need no snapshot.
  std::erase_if(s.cache_points, [&](int64_t p) { return p <= hit.tokens; });
  track_cache_points(s, +1);
}

void Scheduler::find_branch_points(Sequence& s, const kvcache::PrefixHit& hit, int64_t& budget) {
  const int64_t bs = blocks_.block_size();
  const int64_t limit = (s.num_tokens() - 1) / bs * bs;
  // Cached blocks match beyond the last snapshot: s computes that stretch, and snapshots its
  // end for the requests that follow.
  if (hit.matched_tokens > hit.tokens) add_cache_point(s, std::min(hit.matched_tokens, limit));
  // A running sequence still prefilling a prompt that shares more than the hit: the shared
  // part's end is worth a snapshot. The running one takes it when it has not planned past it
  // yet (s then waits for it: prefix_in_flight), else s does.
  for (Sequence* r : running_) {
    if (r->num_computed >= r->prompt_len - 1) continue;
    const int64_t n = std::min<int64_t>({static_cast<int64_t>(r->keys.size()), static_cast<int64_t>(s.keys.size()),
                                         limit / bs, (r->prompt_len - 1) / bs});
    int64_t common = 0;
    while (common < n && r->keys[static_cast<size_t>(common)] == s.keys[static_cast<size_t>(common)]) ++common;
    const int64_t p = common * bs;
    if (p <= hit.tokens) continue;
    if (p <= r->num_computed) {  // r is past it: s computes the stretch and snapshots for the next
      add_cache_point(s, p);
      continue;
    }
    // r's chunk of this step runs past p: end it at p instead (what it gives back returns to
    // the budget), so that r snapshots there and s waits for it.
    if (r->scheduled_step == step_ && r->planned_end > p) budget += shorten_chunk(*r, p);
    add_cache_point(*r, p);
  }
}

int64_t Scheduler::shorten_chunk(Sequence& r, int64_t end) {
  for (size_t i = 0; i < plan_.chunks.size(); ++i) {
    if (plan_.sequences[i] != &r) continue;
    SequenceChunk& c = plan_.chunks[i];
    const int64_t cut = c.n_cached + c.n_tokens() - end;
    if (cut <= 0 || end <= c.n_cached) return 0;
    c.tokens = c.tokens.first(static_cast<size_t>(c.n_tokens() - cut));
    plan_.num_tokens -= cut;
    if (samples(c)) {
      c.logit_rows = 0;
      --plan_.num_samples;
    }
    r.planned_end = end;
    r.snapshot_due = end;
    drop_staged_snapshots(r, end);
    return cut;
  }
  return 0;
}

void Scheduler::add_cache_point(Sequence& s, int64_t p) {
  if (p <= s.num_computed || std::binary_search(s.cache_points.begin(), s.cache_points.end(), p)) return;
  if (s.state == SeqState::running) track_cache_points(s, -1);
  s.cache_points.insert(std::upper_bound(s.cache_points.begin(), s.cache_points.end(), p), p);
  if (s.state == SeqState::running) track_cache_points(s, +1);
}

bool Scheduler::prefix_in_flight(const Sequence& s, int64_t hit) const {
  if (in_flight_.empty()) return false;
  const int64_t bs = blocks_.block_size();
  for (int64_t p = hit + bs; p <= s.num_tokens() - 1 && p / bs <= static_cast<int64_t>(s.keys.size()); p += bs)
    if (in_flight_.count(s.keys[static_cast<size_t>(p / bs - 1)])) return true;
  return false;
}

void Scheduler::track_cache_points(const Sequence& s, int delta) {
  const int64_t bs = blocks_.block_size();
  for (int64_t p : s.cache_points) {
    if (p / bs > static_cast<int64_t>(s.keys.size())) continue;
    const kvcache::PrefixKey k = s.keys[static_cast<size_t>(p / bs - 1)];
    auto it = in_flight_.find(k);
    if (delta > 0) {
      ++in_flight_[k];
    } else if (it != in_flight_.end() && --it->second <= 0) {
      in_flight_.erase(it);
    }
  }
}

int64_t Scheduler::cut_at_cache_point(Sequence& s, int64_t n) {
  s.snapshot_due = 0;
  drop_staged_snapshots(s);
  if (!cache_) return n;
  const int64_t start = s.num_computed;
  for (size_t i = 0; i < s.cache_points.size(); ++i) {
    const int64_t p = s.cache_points[i];
    if (p <= start) continue;
    if (p > start + n) break;
    if (cache_->has_snapshot(s.cache_tokens(), s.keys, p, s.key_root)) continue;  // another sequence cached it
    if (p < start + n && stage_snapshot(s, p - start - 1)) continue;
    s.snapshot_due = p;
    return p - start;
  }
  return n;
}

bool Scheduler::stage_snapshot(Sequence& s, int64_t row) {
  if (slots_.num_free() <= slots_kept()) return false;
  std::optional<kvcache::SlotHandle> h = slots_.acquire();
  if (!h) return false;
  s.staging_slots.push_back(*h);
  s.snapshot_rows.push_back({row, h->id});
  return true;
}

void Scheduler::drop_staged_snapshots(Sequence& s, int64_t from) {
  // Before the chunk completes its rows count from num_computed: point = num_computed + row + 1.
  // from = 0 drops them all at any time.
  while (!s.snapshot_rows.empty() && s.num_computed + s.snapshot_rows.back().row + 1 >= from) {
    slots_.release(s.staging_slots.back());
    s.staging_slots.pop_back();
    s.snapshot_rows.pop_back();
  }
}

void Scheduler::record_prefix(const SequenceChunk& c, Sequence& s) {
  // A prompt just computed: its full blocks are recorded at once, so a request arriving while
  // this one decodes finds them (and the point where it parts from them: a branch point).
  if (c.n_cached < s.prompt_len && s.num_computed >= s.prompt_len)
    cache_->insert(s.table, s.cache_tokens(), s.keys, std::min(s.num_computed, s.prompt_len), s.key_root);
  for (size_t k = 0; k < s.snapshot_rows.size(); ++k) {
    const int64_t p = c.n_cached + s.snapshot_rows[k].row + 1;
    cache_->insert(s.table, s.cache_tokens(), s.keys, p, s.key_root);
    if (auto slot = cache_->add_snapshot(s.cache_tokens(), s.keys, p, s.key_root)) saves_.push_back({s.staging_slots[k].id, *slot});
  }
  // The staging slots go back now: the copies are queued before anything can acquire (and
  // zero) them, which happens in the next schedule().
  drop_staged_snapshots(s);
  if (s.snapshot_due > 0 && s.snapshot_due == s.num_computed) {
    cache_->insert(s.table, s.cache_tokens(), s.keys, s.snapshot_due, s.key_root);
    if (auto slot = cache_->add_snapshot(s.cache_tokens(), s.keys, s.snapshot_due, s.key_root)) saves_.push_back({s.slot->id, *slot});
  }
  s.snapshot_due = 0;
  // Points passed (snapshotted, or cached by another sequence meanwhile) are done.
  if (!s.cache_points.empty() && s.cache_points.front() <= s.num_computed) {
    track_cache_points(s, -1);
    std::erase_if(s.cache_points, [&](int64_t q) { return q <= s.num_computed; });
    track_cache_points(s, +1);
  }
}

std::vector<StateCopy> Scheduler::take_saves() { return std::exchange(saves_, {}); }

void Scheduler::drop_snapshot(kvcache::SlotId snapshot) {
  if (cache_) cache_->drop_snapshot(snapshot);
}

}  // namespace ds::scheduler
