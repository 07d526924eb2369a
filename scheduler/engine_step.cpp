// One engine step: draft -> schedule -> forward -> sample -> update -> publish. The scheduler
// plans the step and settles its outcome (Scheduler::update); the engine runs the model and
// the sampler between the two and turns the outcome into events.
#include <algorithm>
#include <exception>
#include <spdlog/spdlog.h>
#include <stdexcept>

#include "scheduler/engine_core.h"

namespace ds::scheduler {
namespace {

// The plan of chunk i alone (a batch the model rejected is retried chunk by chunk).
StepPlan single_chunk(const StepPlan& plan, size_t i) {
  StepPlan one;
  one.chunks.push_back(plan.chunks[i]);
  one.sequences.push_back(plan.sequences[i]);
  return one;
}

}  // namespace

bool Engine::Core::step() {
  finish_loads();
  propose_drafts();
  const auto t0 = Clock::now();
  const StepPlan& plan = scheduler_.schedule();
  const auto t1 = Clock::now();
  counters_.schedule_seconds_total += seconds_between(t0, t1);
  counters_.preemptions_total = scheduler_.num_preemptions();
  for (Sequence* s : plan.admitted) {
    Live& l = live_.at(s->id);
    if (!l.metrics.was_scheduled) {
      l.metrics.was_scheduled = true;
      l.metrics.first_scheduled = t1;
      counters_.prompt_tokens_total += s->prompt_len;
    }
    if (l.queued) {
      l.queued = false;
      ++dequeued_;
    }
  }
  release_queue_slots();
  flush_offloads();  // before anything below writes what evictions read
  start_loads(plan);
  if (plan.empty()) return wait_for_a_load();

  ++counters_.iterations_total;
  counters_.last_batch_seqs = static_cast<int32_t>(plan.chunks.size());
  counters_.last_batch_tokens = plan.num_tokens;
  counters_.decode_tokens_total += plan.num_decodes;
  counters_.prefill_tokens_total += plan.num_tokens - plan.num_decodes - plan.num_draft_tokens;

  // The MTP module's steps count as drafting, not as the forward or sampling they sit between.
  const double drafting = counters_.draft_seconds_total;
  if (mtp_) extend_mtp_drafts(plan);
  // Read before the step settles (which moves the sequences on).
  const std::string step_trace = spdlog::should_log(spdlog::level::debug) ? describe_step(plan) : std::string();
  // Images first: a step whose encoding failed runs no forward (its requests are failed).
  // Adapter loads before anything can fail a step's requests: a slot the plan handed out must
  // hold its adapter (or be invalidated) whatever happens to the step.
  const kernels::Tensor* logits = load_loras(plan) && prepare_images(plan) ? forward(plan) : nullptr;
  const auto t2 = Clock::now();
  counters_.forward_seconds_total += seconds_between(t1, t2) - (counters_.draft_seconds_total - drafting);

  const double drafted = counters_.draft_seconds_total;
  if (logits) settle(plan, *logits);
  release_images();
  counters_.sample_seconds_total += seconds_between(t2, Clock::now()) - (counters_.draft_seconds_total - drafted);
  if (!step_trace.empty())
    spdlog::debug("step {}: {:.1f} ms, {}", counters_.iterations_total, seconds_between(t1, Clock::now()) * 1e3,
                  step_trace);

  if (config_.check_invariants) {
    try {
      scheduler_.check_invariants();
    } catch (const std::logic_error& e) {
      ++counters_.invariant_violations;
      counters_.last_error = e.what();
      spdlog::error("engine: {}", e.what());
    }
  }
  return true;
}

void Engine::Core::propose_drafts() {
  if (!drafter_) return;
  const auto t0 = Clock::now();
  // With many sequences running, a verify step's extra rows make the step GEMM-bound and cost
  // more than a weak drafter saves (docs/bench-log, "Speculative decoding at controlled
  // acceptance"): past disable_by_batch_size the engine decodes plainly.
  const int32_t limit = config_.speculative.disable_by_batch_size;
  const bool off = limit > 0 && scheduler_.num_running() > limit;
  for (Sequence* s : scheduler_.running()) {
    s->draft.clear();
    if (off || s->num_pending() != 1) continue;  // or prefilling
    // A request under a grammar does not speculate: its rows would need the matcher advanced
    // through the draft and rolled back.
    if (const auto it = live_.find(s->id); it != live_.end() && it->second.matcher) continue;
    // A verify step emits up to 1 + K tokens: no more than the request may still generate.
    const int64_t k = std::min<int64_t>(num_speculative_tokens_,
                                        s->finish.tokens_left(s->num_generated(), s->num_tokens()) - 1);
    if (k < 1) continue;
    drafter_->propose(s->id, s->tokens, s->prompt_len, static_cast<int32_t>(k), s->draft);
    if (static_cast<int64_t>(s->draft.size()) > k) s->draft.resize(static_cast<size_t>(k));
  }
  counters_.draft_seconds_total += seconds_between(t0, Clock::now());
}

const kernels::Tensor* Engine::Core::forward(const StepPlan& plan) {
  load_batch(plan);
  try {
    // Prefix hits start from their snapshots: copied in before the forward reads the slots.
    for (const StateCopy& c : plan.restores) model_.copy_state(c.from, c.to);
    return &model_.forward(batch_);
  } catch (const std::invalid_argument& e) {
    // Rejected before any cache was written: find the chunks at fault one by one.
    ++counters_.forward_errors_total;
    counters_.last_error = e.what();
    spdlog::warn("engine: forward rejected a batch of {} sequences ({}); retrying them one by one",
                 plan.chunks.size(), e.what());
    retry_chunks_alone(plan);
  } catch (const std::exception& e) {
    // The caches of this batch may be half written: its requests cannot continue.
    ++counters_.forward_errors_total;
    counters_.last_error = e.what();
    spdlog::error("engine: forward failed for a batch of {} sequences: {}", plan.chunks.size(), e.what());
    std::vector<RequestId> ids;
    for (const Sequence* s : plan.sequences) ids.push_back(s->id);
    for (RequestId id : ids) fail_request(id, std::string("model error: ") + e.what());
  }
  return nullptr;
}

void Engine::Core::retry_chunks_alone(const StepPlan& plan) {
  // A chunk that fails again ends only its own request; the others' chunks are untouched.
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const StepPlan one = single_chunk(plan, i);
    load_batch(one);
    const kernels::Tensor* logits = nullptr;
    try {
      logits = &model_.forward(batch_);
    } catch (const std::exception& e) {
      fail_request(one.sequences[0]->id, std::string("model rejected the request: ") + e.what());
      continue;
    }
    settle(one, *logits);
  }
}

void Engine::Core::settle(const StepPlan& plan, const kernels::Tensor& logits) {
  sample(plan, logits);
  if (mtp_) note_mtp_positions(plan);
  const StepOutcome& outcome = scheduler_.update(plan, sampled_);
  save_snapshots();
  publish(outcome);
  if (mtp_) mtp_catch_up(outcome);
}

void Engine::Core::save_snapshots() {
  flush_offloads();  // a snapshot slot evicted in this update is rewritten below
  const std::vector<StateCopy> saves = scheduler_.take_saves();
  scheduler_.snapshots_saved();  // queued below (on the device, before any later copy reads them)
  for (const StateCopy& c : saves) {
    try {
      model_.copy_state(c.from, c.to);
    } catch (const std::exception& e) {
      // The snapshot holds nothing usable: forget it; the sequence itself is unaffected.
      spdlog::warn("engine: a prefix-cache snapshot copy failed: {}", e.what());
      scheduler_.drop_snapshot(c.to);
    }
  }
}

std::string Engine::Core::describe_step(const StepPlan& plan) const {
  // One line per step at --log-level debug, so a serving run's scheduling can be read back
  // (which prompts ran in which step, and what each step cost).
  std::string prefills;
  int64_t verify = 0;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const SequenceChunk& c = plan.chunks[i];
    const Sequence& s = *plan.sequences[i];
    const int32_t drafted = num_drafted(c);
    if (drafted > 0) ++verify;
    if (c.n_tokens() == 1 + drafted && c.n_cached + c.n_tokens() >= s.prompt_len) continue;  // a decode or verify
    prefills += fmt::format(" {}:{}+{}{}{}", s.id, c.n_cached, c.n_tokens(),
                            c.snapshot_rows.empty() ? "" : fmt::format("s{}", c.snapshot_rows.size()),
                            samples(c) ? "*" : "");
  }
  return fmt::format("{} tokens, {} decodes ({} verify), {} admitted, {} preempted, {} waiting; prefill "
                     "id:start+len (sN: N snapshot rows, *: samples):{}",
                     plan.num_tokens, plan.num_decodes, verify, plan.admitted.size(), plan.preempted.size(),
                     scheduler_.num_waiting(), prefills);
}

void Engine::Core::extend_mtp_drafts(const StepPlan& plan) {
  // On failure the chunks keep their placeholder drafts, which verification rejects.
  run_mtp("draft", [&] { mtp_->extend(plan); });
}

void Engine::Core::note_mtp_positions(const StepPlan& plan) {
  // Prefill chunks that stop short of their sequence's last token first (the tokens after
  // them are known), then the sampling chunks, whose next tokens publish() settles.
  computed_.clear();
  computed_of_chunk_.clear();
  auto add = [&](const SequenceChunk& c, const Sequence& s, int64_t row) -> MtpDrafter::Computed& {
    MtpDrafter::Computed& m = computed_.emplace_back();
    m.id = s.id;
    m.block_ids.assign(c.block_ids.begin(), c.block_ids.end());
    m.slot = c.state_slot;
    m.start = c.n_cached;
    m.hidden_row = row;
    return m;
  };
  int64_t row = 0;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const SequenceChunk& c = plan.chunks[i];
    const Sequence& s = *plan.sequences[i];
    if (!samples(c)) {
      const auto first = s.tokens.begin() + c.n_cached;
      add(c, s, row).next_tokens.assign(first + 1, first + 1 + c.n_tokens());
    }
    row += c.n_tokens();
  }
  row = 0;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const SequenceChunk& c = plan.chunks[i];
    if (samples(c)) {
      computed_of_chunk_.push_back(computed_.size());
      MtpDrafter::Computed& m = add(c, *plan.sequences[i], row);
      // A prefill or decode chunk's own positions before its last, each followed by its next
      // token; a verify chunk's are its pending token's and the accepted drafts' (publish()).
      if (num_drafted(c) == 0) m.next_tokens.assign(c.tokens.begin() + 1, c.tokens.end());
    }
    row += c.n_tokens();
  }
}

void Engine::Core::mtp_catch_up(const StepOutcome& outcome) {
  for (size_t k = 0; k < outcome.updates.size(); ++k) {
    const SequenceUpdate& u = outcome.updates[k];
    MtpDrafter::Computed& m = computed_[computed_of_chunk_[k]];
    if (u.num_tokens == 0) {
      m.next_tokens.clear();  // its row had no token: nothing computed is worth the module's step
      continue;
    }
    // The positions this chunk computed, each followed by a token now known.
    for (int32_t i = 0; i < u.num_tokens; ++i)
      m.next_tokens.push_back(sampled_[static_cast<size_t>(u.first_row + i)].token);
    m.goes_on = !u.finish;
  }
  for (MtpDrafter::Computed& m : computed_)
    if (!live_.count(m.id)) m.goes_on = false;  // ended (or failed) in this step
  if (computed_.empty()) return;
  run_mtp("catch-up", [&] { mtp_->catch_up(computed_); });
}

void Engine::Core::run_mtp(const char* what, const std::function<void()>& call) {
  const auto t0 = Clock::now();
  try {
    call();
  } catch (const std::exception& e) {
    counters_.last_error = e.what();
    spdlog::warn("engine: the MTP module's {} step failed: {}", what, e.what());
    mtp_->reset();
  }
  counters_.draft_seconds_total += seconds_between(t0, Clock::now());
}

}  // namespace ds::scheduler
