#include "scheduler/scheduler.h"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

namespace ds::scheduler {

Scheduler::Scheduler(SchedulerConfig config, kvcache::BlockPool& blocks, kvcache::StatePool& slots,
                     kvcache::PrefixCache* cache)
    : config_(config), blocks_(blocks), slots_(slots), cache_(cache), lora_(config.max_loras) {
  if (config_.max_num_seqs < 1) throw std::invalid_argument("scheduler: max_num_seqs must be >= 1");
  if (config_.max_num_batched_tokens < 1)
    throw std::invalid_argument("scheduler: max_num_batched_tokens must be >= 1");
}

Scheduler::~Scheduler() {
  // Give everything back, so pools that outlive the scheduler end up fully free.
  for (auto& [id, seq] : seqs_) {
    if (seq->state == SeqState::running) {
      unpin_host(*seq);
      if (cache_)
        cache_->release(seq->table);
      else
        blocks_.free_table(seq->table);
      if (seq->slot) slots_.release(*seq->slot);
      release_spare_slots(*seq);
      drop_staged_snapshots(*seq);
    }
  }
}

Sequence& Scheduler::add(RequestId id, std::vector<int32_t> tokens, FinishCriteria finish,
                         std::vector<int64_t> cache_points, SequenceImages images, LoraId lora_id) {
  if (tokens.empty()) throw std::invalid_argument("scheduler: a sequence needs at least one token");
  if (lora_id != 0 && config_.max_loras < 1)
    throw std::invalid_argument("scheduler: a sequence names a LoRA adapter but max_loras is 0");
  if (seqs_.count(id)) throw std::invalid_argument("scheduler: request id " + std::to_string(id) + " is already queued");
  auto seq = std::make_unique<Sequence>(id, next_arrival_++, std::move(tokens), blocks_.block_size(),
                                        std::move(finish));
  Sequence& s = *seq;
  s.lora_id = lora_id;
  // Chains of an adapter's sequences start from a root of their own: the id mixed with this
  // scheduler's random salt. Ids are counted per process, so without the salt adapter 1 of one
  // run would find adapter 1 of an earlier run in the disk tier (--kv-offload-dir).
  if (lora_id != 0) s.key_root = kvcache::chain_key(lora_id ^ lora_salt_, {});
  s.images = std::move(images.spans);
  if (!images.key_tokens.empty()) {
    if (images.key_tokens.size() != s.tokens.size())
      throw std::invalid_argument("scheduler: the key tokens of a prompt with images must match its length");
    s.key_tokens = std::move(images.key_tokens);
  }
  if (cache_) {
    // Block boundaries inside the prompt with one token after them (a hit must leave one token
    // to compute), at or before the positions the caller names.
    const int64_t bs = blocks_.block_size();
    for (int64_t p : cache_points) {
      p = std::min(p, s.prompt_len - 1) / bs * bs;
      if (p > 0) s.cache_points.push_back(p);
    }
    std::sort(s.cache_points.begin(), s.cache_points.end());
    s.cache_points.erase(std::unique(s.cache_points.begin(), s.cache_points.end()), s.cache_points.end());
    s.update_keys(blocks_.block_size());
  }
  seqs_.emplace(id, std::move(seq));
  waiting_.push_back(&s);
  return s;
}

Sequence* Scheduler::find(RequestId id) {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

const StepPlan& Scheduler::schedule() {
  plan_.chunks.clear();
  plan_.sequences.clear();
  plan_.restores.clear();
  plan_.preempted.clear();
  plan_.admitted.clear();
  plan_.loads.clear();
  plan_.lora_loads.clear();
  plan_.num_tokens = plan_.num_decodes = plan_.num_draft_tokens = plan_.num_samples = 0;
  ++step_;
  int64_t budget = config_.max_num_batched_tokens;
  encoder_budget_ = config_.encoder_budget();
  schedule_decodes(budget);
  schedule_running_prefills(budget);
  if (plan_.preempted.empty()) schedule_admissions(budget);
  finish_plan();
  return plan_;
}

void Scheduler::finish_plan() {
  for (size_t i = 0; i < plan_.chunks.size(); ++i) {
    SequenceChunk& c = plan_.chunks[i];
    const Sequence& s = *plan_.sequences[i];
    c.block_ids = s.table.block_ids();
    c.state_slot = s.slot->id;
    c.lora_slot = s.lora_slot;
    if (num_drafted(c) > 0) {
      c.row_state_slots = s.row_slots;
      c.snapshot_rows = {};
    } else {
      c.row_state_slots = {};
      c.snapshot_rows = s.snapshot_rows;
    }
  }
}

void Scheduler::schedule_decodes(int64_t& budget) {
  // Indices stay valid: preemption only removes sequences after i (or i itself, the last).
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& s = *running_[i];
    if (s.num_pending() != 1 || s.loading) continue;
    bool preempted_self = false;
    while (s.table.blocks_needed(1) > available_blocks()) {
      Sequence& victim = *running_.back();
      preempt(victim);
      if (&victim == &s) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;  // s was the last running sequence
    grow_table(s, 1);
    add_chunk(s, 1);
    ++plan_.num_decodes;
    budget -= 1;
  }
  schedule_drafts(budget);
}

void Scheduler::schedule_drafts(int64_t& budget) {
  // Free slots that sequences waiting for admission may need are not drafted with.
  const int64_t kept = slots_kept();
  bool any = false;
  for (size_t i = 0; i < plan_.chunks.size(); ++i) {  // the decodes: nothing else is planned yet
    SequenceChunk& c = plan_.chunks[i];
    Sequence& s = *plan_.sequences[i];
    if (s.draft.empty() || budget <= 0) {
      s.draft.clear();
      continue;
    }
    const int32_t k = plan_draft(s, budget, kept);
    if (k == 0) continue;
    grow_table(s, 1 + k);
    c.tokens = s.verify_tokens;  // the pending token, then the draft: every row samples
    c.logit_rows = 1 + k;
    s.planned_end += k;
    plan_.num_tokens += k;
    plan_.num_draft_tokens += k;
    budget -= k;
    any = true;
  }
  if (!any) return;
  // Single-token decodes before verify chunks (a device backend's decode kernel takes the
  // leading one-row chunks), each chunk staying with its sequence.
  std::vector<size_t> order(plan_.chunks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(), [&](size_t i) { return num_drafted(plan_.chunks[i]) == 0; });
  std::vector<SequenceChunk> chunks;
  std::vector<Sequence*> seqs;
  for (size_t i : order) {
    chunks.push_back(plan_.chunks[i]);
    seqs.push_back(plan_.sequences[i]);
  }
  plan_.chunks.swap(chunks);
  plan_.sequences.swap(seqs);
}

int32_t Scheduler::plan_draft(Sequence& s, int64_t budget, int64_t slots_kept) {
  const int64_t bs = blocks_.block_size();
  // Room in the table past the pending token, and in free blocks: never evicted cached ones.
  const int64_t room = s.table.capacity() - (s.num_computed + 1) + static_cast<int64_t>(blocks_.num_free()) * bs;
  int64_t k = std::min({static_cast<int64_t>(s.draft.size()), budget, room});
  while (static_cast<int64_t>(s.spare_slots.size()) < k && slots_.num_free() > slots_kept) {
    std::optional<kvcache::SlotHandle> h = slots_.acquire();
    if (!h) break;
    s.spare_slots.push_back(*h);
  }
  k = std::min<int64_t>(k, static_cast<int64_t>(s.spare_slots.size()));
  s.draft.resize(static_cast<size_t>(std::max<int64_t>(k, 0)));
  s.verify_tokens.assign(1, s.tokens.back());
  s.verify_tokens.insert(s.verify_tokens.end(), s.draft.begin(), s.draft.end());
  s.row_slots.clear();
  for (int64_t i = 0; i < k; ++i) s.row_slots.push_back(s.spare_slots[static_cast<size_t>(i)].id);
  return static_cast<int32_t>(std::max<int64_t>(k, 0));
}

bool Scheduler::reclaim_spare_slot() {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    Sequence& s = **it;
    const size_t used = s.scheduled_step == step_ ? s.row_slots.size() : 0;
    if (s.spare_slots.size() > used) {
      slots_.release(s.spare_slots.back());
      s.spare_slots.pop_back();
      return true;
    }
  }
  return false;
}

void Scheduler::release_spare_slots(Sequence& s) {
  for (const kvcache::SlotHandle& h : s.spare_slots) slots_.release(h);
  s.spare_slots.clear();
  s.row_slots.clear();
  s.verify_tokens.clear();
  s.draft.clear();
}

void Scheduler::schedule_running_prefills(int64_t& budget) {
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& s = *running_[i];
    if (s.num_pending() <= 1 || s.scheduled_step == step_ || s.loading) continue;
    const int64_t want = std::min(s.num_pending(), budget);
    int64_t fit = fitting_tokens(s, want);
    while (fit == 0) {
      // The most recently admitted sequence after s that has no chunk in this step.
      Sequence* victim = nullptr;
      for (size_t j = running_.size(); j-- > i + 1;) {
        if (running_[j]->scheduled_step != step_) {
          victim = running_[j];
          break;
        }
      }
      if (!victim) break;
      preempt(*victim);
      fit = fitting_tokens(s, want);
    }
    if (fit == 0) continue;
    fit = fit_encoder(s, s.num_computed, fit);
    if (fit == 0) continue;
    fit = cut_at_cache_point(s, fit);
    grow_table(s, fit);
    add_chunk(s, fit);
    budget -= fit;
  }
}

void Scheduler::schedule_admissions(int64_t& budget) {
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Sequence& s = *waiting_.front();
    // Its adapter needs a slot first: when all are pinned it waits, and so does everyone
    // behind it (see "LoRA adapters").
    if (s.lora_id != 0 && !lora_.can_pin(s.lora_id)) break;
    kvcache::PrefixHit hit;
    if (cache_ && !look_up_prefix(s, hit, budget)) break;
    if (!whole_prompt_fits(s)) {
      give_back_lookup(s);
      break;
    }
    if (hit.from_host()) {
      if (!admit_from_host(s, hit)) break;
      continue;  // it runs once its copies are in (no chunk, no budget now)
    }
    s.num_computed = hit.tokens;
    const int64_t want = cut_at_cache_point(s, fit_encoder(s, hit.tokens, std::min(s.num_pending(), budget)));
    std::optional<kvcache::Reservation> blocks = reserve_blocks(s.table.blocks_needed(hit.tokens + want - s.table.num_tokens()));
    std::optional<kvcache::SlotHandle> slot = blocks && want > 0 ? slots_.acquire() : std::nullopt;  // acquire zeroes the slot
    if (blocks && want > 0 && !slot && reclaim_spare_slot()) slot = slots_.acquire();
    if (!slot) {
      // Neither or both: give back the hit (the reservation rolls back as it goes out of scope).
      give_back_lookup(s);
      break;
    }
    blocks_.commit(*blocks, s.table);
    if (cache_) admit_prefix(s, hit, slot->id);
    s.slot = slot;
    pin_lora(s);
    s.state = SeqState::running;
    s.admission = ++next_admission_;
    waiting_.pop_front();
    running_.push_back(&s);
    plan_.admitted.push_back(&s);
    add_chunk(s, want);
    budget -= want;
  }
}

void Scheduler::pin_lora(Sequence& s) {
  if (s.lora_id == 0) return;
  const LoraResidency::Pin pin = lora_.pin(s.lora_id);
  s.lora_slot = pin.slot;
  if (pin.load) plan_.lora_loads.push_back({pin.slot, &s});
}

int64_t Scheduler::slots_kept() const {
  return std::max<int64_t>(0, std::min<int64_t>(static_cast<int64_t>(waiting_.size()),
                                                config_.max_num_seqs - static_cast<int64_t>(running_.size())));
}

int64_t Scheduler::prompt_blocks_owed() const {
  int64_t owed = 0;
  for (const Sequence* r : running_)
    if (r->num_pending() > 1) owed += r->table.blocks_needed(r->num_tokens() - r->table.num_tokens());
  return owed;
}

bool Scheduler::whole_prompt_fits(const Sequence& s) const {
  if (running_.empty()) return true;  // alone, any sequence of max_ctx fits (the engine checks)
  const int64_t need = s.table.blocks_needed(s.num_tokens() - s.table.num_tokens());
  return need + prompt_blocks_owed() <= available_blocks();
}

void Scheduler::give_back_lookup(Sequence& s) {
  if (cache_) {
    unpin_host(s);
    cache_->release(s.table);
  }
  s.num_computed = 0;
  s.snapshot_due = 0;
  drop_staged_snapshots(s);
}

int32_t Scheduler::available_blocks() const {
  return cache_ ? cache_->available_blocks() : blocks_.num_free();
}

std::optional<kvcache::Reservation> Scheduler::reserve_blocks(int32_t n) {
  if (cache_ && !cache_->make_free(n)) return std::nullopt;
  return blocks_.reserve(n);
}

int64_t Scheduler::fit_encoder(Sequence& s, int64_t start, int64_t n) {
  for (SequenceImage& im : s.images) {
    if (im.offset >= start + n) break;  // in prompt order: the rest lie beyond the chunk
    if (im.ready || im.offset + im.tokens <= start || im.planned_step == step_) continue;
    if (im.tokens > encoder_budget_) return std::max<int64_t>(0, im.offset - start);
    encoder_budget_ -= im.tokens;
    im.planned_step = step_;
  }
  return n;
}

int64_t Scheduler::fitting_tokens(const Sequence& s, int64_t want) const {
  const int64_t room = s.table.capacity() - s.num_computed +
                       static_cast<int64_t>(available_blocks()) * blocks_.block_size();
  return std::min(want, room);
}

void Scheduler::grow_table(Sequence& s, int64_t n) {
  const int32_t need = s.table.blocks_needed(s.num_computed + n - s.table.num_tokens());
  if (need == 0) return;
  std::optional<kvcache::Reservation> r = reserve_blocks(need);
  if (!r) throw std::logic_error("scheduler: blocks checked free could not be reserved");
  blocks_.commit(*r, s.table);
}

void Scheduler::add_chunk(Sequence& s, int64_t n) {
  // Tables and slots are filled in once the plan is complete (finish_plan()).
  SequenceChunk c;
  c.tokens = std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(s.num_computed), static_cast<size_t>(n));
  c.n_cached = s.num_computed;
  c.logit_rows = s.num_computed + n == s.num_tokens() ? 1 : 0;
  s.scheduled_step = step_;
  s.planned_end = s.num_computed + n;
  plan_.chunks.push_back(c);
  plan_.sequences.push_back(&s);
  plan_.num_tokens += n;
  if (samples(c)) ++plan_.num_samples;
}

void Scheduler::release_cache(Sequence& s) {
  if (s.loading) abandon_load(s);  // records only the blocks that were on the device
  if (cache_) {
    s.update_keys(blocks_.block_size());
    cache_->insert(s.table, s.cache_tokens(), s.keys, s.num_computed, s.key_root);
    cache_->release(s.table);
    track_cache_points(s, -1);
  } else {
    blocks_.free_table(s.table);
  }
  if (s.slot) slots_.release(*s.slot);
  s.slot.reset();
  if (s.lora_slot >= 0) lora_.unpin(s.lora_slot);
  s.lora_slot = -1;
  release_spare_slots(s);
  drop_staged_snapshots(s);
  s.snapshot_due = 0;
}

void Scheduler::preempt(Sequence& s) {
  release_cache(s);
  s.num_computed = 0;
  s.state = SeqState::waiting;
  ++s.num_preemptions;
  ++num_preemptions_;
  remove_running(s);
  waiting_.push_front(&s);
  plan_.preempted.push_back(s.id);
}

void Scheduler::remove_running(Sequence& s) {
  auto it = std::find(running_.begin(), running_.end(), &s);
  if (it != running_.end()) running_.erase(it);
}

void Scheduler::check_invariants() const {
  auto fail = [](const std::string& m) { throw std::logic_error("scheduler invariant: " + m); };
  // References of running tables per block.
  std::unordered_map<kvcache::BlockId, std::pair<kvcache::BlockHandle, int32_t>> held;
  for (const Sequence* s : running_) {
    const std::string who = "request " + std::to_string(s->id);
    if (s->state != SeqState::running) fail(who + " is listed running but is not");
    if (!s->slot || !slots_.is_live(*s->slot)) fail(who + " runs without a live state slot");
    if (s->table.num_tokens() != s->num_computed) fail(who + "'s table and computed count differ");
    if (s->num_pending() < 1) fail(who + " runs with nothing pending");
    if (s->table.capacity() < s->num_computed) fail(who + "'s table is too small");
    for (const kvcache::SlotHandle& h : s->spare_slots)
      if (!slots_.is_live(h)) fail(who + " holds a spare state slot that is not live");
    for (const kvcache::SlotHandle& h : s->staging_slots)
      if (!slots_.is_live(h)) fail(who + " holds a snapshot staging slot that is not live");
    for (const auto& h : s->table.blocks()) {
      if (!blocks_.is_live(h)) fail(who + " holds a block that is not live");
      auto& [handle, refs] = held[h.id];
      handle = h;
      ++refs;
    }
  }
  for (const Sequence* s : waiting_) {
    const std::string who = "request " + std::to_string(s->id);
    if (s->state != SeqState::waiting) fail(who + " is queued but not waiting");
    if (s->slot || s->table.num_blocks() != 0 || s->num_computed != 0 || !s->spare_slots.empty() ||
        !s->staging_slots.empty() || s->loading || !s->host_pins.empty() || s->host_snapshot_pin >= 0)
      fail(who + " waits while holding cache");
  }
  if (running_.size() + waiting_.size() != seqs_.size()) fail("a sequence is neither running nor waiting");
  // Every used block is held by running tables and/or the prefix cache, and its refcount is
  // exactly their number.
  int64_t used = 0;
  for (const auto& [id, entry] : held) {
    const auto& [handle, refs] = entry;
    const bool cached = cache_ && cache_->is_cached(id);
    ++used;
    if (blocks_.refcount(handle) != refs + (cached ? 1 : 0))
      fail("block " + std::to_string(id) + " has " + std::to_string(blocks_.refcount(handle)) + " references, " +
           std::to_string(refs) + " tables" + (cached ? " and the cache" : "") + " hold it");
  }
  if (cache_) {
    cache_->check_invariants();
    const auto cs = cache_->stats();
    used += cs.blocks;
    for (const auto& [id, entry] : held)
      if (cache_->is_cached(id)) --used;  // counted once
  }
  if (used != blocks_.num_used())
    fail("pool has " + std::to_string(blocks_.num_used()) + " blocks in use, tables and the cache hold " +
         std::to_string(used));
  int64_t held_slots = 0;
  for (const Sequence* s : running_)
    held_slots += 1 + static_cast<int64_t>(s->spare_slots.size() + s->staging_slots.size());
  if (held_slots != slots_.num_used())
    fail("pool has " + std::to_string(slots_.num_used()) + " slots in use, " + std::to_string(running_.size()) +
         " running sequences hold " + std::to_string(held_slots));
  if (static_cast<int32_t>(running_.size()) > config_.max_num_seqs) fail("more running than max_num_seqs");
  // LoRA slots: pinned exactly by the running sequences with an adapter, each on its own's.
  std::vector<int32_t> lora_pins(static_cast<size_t>(lora_.num_slots()), 0);
  for (const Sequence* s : running_) {
    if ((s->lora_id != 0) != (s->lora_slot >= 0)) fail("request " + std::to_string(s->id) + " runs without its LoRA slot");
    if (s->lora_slot < 0) continue;
    if (lora_.slot_of(s->lora_id) != s->lora_slot) fail("request " + std::to_string(s->id) + "'s LoRA slot holds another adapter");
    ++lora_pins[static_cast<size_t>(s->lora_slot)];
  }
  for (const Sequence* s : waiting_)
    if (s->lora_slot >= 0) fail("request " + std::to_string(s->id) + " waits while pinning a LoRA slot");
  for (int32_t i = 0; i < lora_.num_slots(); ++i)
    if (lora_.pins(i) != lora_pins[static_cast<size_t>(i)])
      fail("LoRA slot " + std::to_string(i) + " has " + std::to_string(lora_.pins(i)) + " pins, running sequences hold " +
           std::to_string(lora_pins[static_cast<size_t>(i)]));
  for (size_t i = 1; i < running_.size(); ++i)
    if (running_[i - 1]->admission >= running_[i]->admission) fail("running list out of admission order");
}

}  // namespace ds::scheduler
