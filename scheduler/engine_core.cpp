// The engine thread: intake, cancellations, one step per iteration, event delivery.
#include <algorithm>
#include <exception>
#include <spdlog/spdlog.h>
#include <stdexcept>

#include "scheduler/engine_core.h"

namespace ds::scheduler {
namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

Engine::Core::Core(ForwardModel& model, const EngineConfig& config, const kvcache::PoolSizes& sizes,
                   int64_t max_ctx, std::unique_ptr<kernels::Sampler> sampler)
    : model_(model), config_(config), max_ctx_(max_ctx), eos_ids_(model.eos_token_ids()),
      blocks_(sizes.num_blocks, sizes.block_size),
      slots_(sizes.num_slots, model.cache_geometry().state, model.state_zero_fn()),
      prefix_cache_(config.prefix_caching
                        ? std::make_unique<kvcache::PrefixCache>(blocks_, sizes.num_slots, sizes.num_snapshots)
                        : nullptr),
      scheduler_(config.scheduler, blocks_, slots_, prefix_cache_.get()), sampler_(std::move(sampler)),
      seeder_(std::random_device{}()) {
  counters_.blocks_total = sizes.num_blocks;
  counters_.block_size = sizes.block_size;
  counters_.slots_total = sizes.num_slots;
  counters_.prefix_caching = config.prefix_caching;
  counters_.prefix_cache_snapshot_capacity = sizes.num_snapshots;
  counters_.max_ctx = max_ctx;
}

void Engine::Core::run(Shared& shared) {
  shared_ = &shared;
  bool stalled = false;
  for (;;) {
    std::vector<Shared::Pending> submissions;
    std::vector<RequestId> cancels;
    bool stopping = false;
    Clock::time_point deadline;
    {
      std::unique_lock lock(shared.mu);
      auto ready = [&] {
        return !shared.submissions.empty() || !shared.cancels.empty() || shared.stopping ||
               (scheduler_.has_work() && !stalled);
      };
      if (stalled)
        shared.cv.wait_for(lock, std::chrono::milliseconds(5), ready);
      else
        shared.cv.wait(lock, ready);
      submissions.swap(shared.submissions);
      cancels.swap(shared.cancels);
      stopping = shared.stopping;
      deadline = shared.drain_deadline;
    }
    try {
      intake(submissions);
      apply_cancels(cancels);
      if (stopping && Clock::now() >= deadline) end_all(FinishReason::cancelled, {});
      stalled = scheduler_.has_work() && !step();
      if (stalled) spdlog::warn("engine: the scheduler planned an empty step with work pending");
    } catch (const std::exception& e) {
      // A fault in the engine's own bookkeeping: end everything rather than serve from a
      // state that may be inconsistent.
      spdlog::error("engine: internal error, failing every request: {}", e.what());
      counters_.last_error = e.what();
      end_all(FinishReason::error, std::string("internal engine error: ") + e.what());
      stalled = false;
    }
    publish(shared);
    deliver();
    if (stopping && !scheduler_.has_work() && live_.empty()) break;
  }
}

void Engine::Core::intake(std::vector<Shared::Pending>& submissions) {
  for (Shared::Pending& p : submissions) {
    Live l;
    l.stream = std::move(p.stream);
    l.sampling = std::move(p.request.sampling);
    l.rng = kernels::SamplerRng(l.sampling.seed ? *l.sampling.seed : seeder_());
    l.metrics.submitted = p.submitted;
    l.metrics.prompt_tokens = static_cast<int64_t>(p.request.prompt_size());
    ++counters_.requests_submitted_total;

    FinishCriteria finish;
    finish.max_tokens = p.request.max_tokens;
    finish.max_ctx = max_ctx_;
    finish.stop_ids = p.request.stop_token_ids;
    if (!p.request.ignore_eos) finish.stop_ids.insert(finish.stop_ids.end(), eos_ids_.begin(), eos_ids_.end());
    std::sort(finish.stop_ids.begin(), finish.stop_ids.end());
    finish.stop_ids.erase(std::unique(finish.stop_ids.begin(), finish.stop_ids.end()), finish.stop_ids.end());

    if (p.request.grammar) {
      // End tokens: whatever stops this request, and the eos ids even when it ignores eos
      // (the grammar may have nothing else to offer once complete).
      std::vector<int32_t> end_tokens = finish.stop_ids;
      end_tokens.insert(end_tokens.end(), eos_ids_.begin(), eos_ids_.end());
      l.matcher = std::make_unique<grammar::GrammarMatcher>(std::move(p.request.grammar), std::move(end_tokens));
      l.grammar_after = p.request.grammar_after;
      l.constrained = l.grammar_after < 0;
    }
    const RequestId id = p.id;
    live_.emplace(id, std::move(l));
    if (static_cast<int64_t>(p.request.prompt_size()) >= max_ctx_) {
      // The prompt already fills the context: nothing can be generated.
      RequestEvent e;
      e.finish = FinishReason::length;
      end_request(id, std::move(e));
      continue;
    }
    scheduler_.add(id, std::vector<int32_t>(*p.request.prompt), std::move(finish), std::move(p.request.cache_points));
  }
}

void Engine::Core::apply_cancels(const std::vector<RequestId>& ids) {
  for (RequestId id : ids) {
    if (!live_.count(id)) continue;  // already over
    RequestEvent e;
    e.finish = FinishReason::cancelled;
    end_request(id, std::move(e));
  }
}

void Engine::Core::end_all(FinishReason reason, const std::string& error) {
  std::vector<RequestId> ids;
  ids.reserve(live_.size());
  for (const auto& [id, l] : live_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (RequestId id : ids) {
    RequestEvent e;
    e.finish = reason;
    e.error = error;
    try {
      end_request(id, std::move(e));
    } catch (const std::exception& ex) {
      spdlog::error("engine: could not release request {}: {}", id, ex.what());
      live_.erase(id);
    }
  }
}

bool Engine::Core::step() {
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
  if (plan.empty()) return false;

  ++counters_.iterations_total;
  counters_.last_batch_seqs = static_cast<int32_t>(plan.chunks.size());
  counters_.last_batch_tokens = plan.num_tokens;
  counters_.decode_tokens_total += plan.num_decodes;
  counters_.prefill_tokens_total += plan.num_tokens - plan.num_decodes;

  batch_.seqs.clear();
  sampling_.clear();
  for (const SequenceChunk& c : plan.chunks) {
    qwen35::SequenceChunk sc;
    sc.tokens = c.tokens();
    sc.n_cached = c.start;
    sc.block_table = &c.seq->table;
    sc.state_slot = c.seq->slot->id;
    sc.logit_rows = c.samples ? 1 : 0;
    batch_.seqs.push_back(sc);
    if (c.samples) sampling_.push_back(c);
  }

  const kernels::Tensor* logits = nullptr;
  try {
    // Prefix hits start from their snapshots: copied in before the forward reads the slots.
    for (const StateCopy& c : plan.restores) model_.copy_state(c.from, c.to);
    logits = &model_.forward(batch_);
  } catch (const std::invalid_argument& e) {
    // Rejected before any cache was written: find the chunks at fault one by one.
    ++counters_.forward_errors_total;
    counters_.last_error = e.what();
    spdlog::warn("engine: forward rejected a batch of {} sequences ({}); retrying them one by one",
                 plan.chunks.size(), e.what());
    retry_chunks_alone(plan.chunks);
  } catch (const std::exception& e) {
    // The caches of this batch may be half written: its requests cannot continue.
    ++counters_.forward_errors_total;
    counters_.last_error = e.what();
    spdlog::error("engine: forward failed for a batch of {} sequences: {}", plan.chunks.size(), e.what());
    const std::vector<SequenceChunk> chunks = plan.chunks;
    for (const SequenceChunk& c : chunks) fail_request(c.seq->id, std::string("model error: ") + e.what());
  }
  const auto t2 = Clock::now();
  counters_.forward_seconds_total += seconds_between(t1, t2);

  if (logits) {
    for (const SequenceChunk& c : plan.chunks) scheduler_.complete(c);
    save_snapshots();
    if (!sampling_.empty()) sample_and_emit(sampling_, *logits);
  }
  counters_.sample_seconds_total += seconds_between(t2, Clock::now());

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

void Engine::Core::retry_chunks_alone(std::vector<SequenceChunk> chunks) {
  for (const SequenceChunk& c : chunks) {
    const RequestId id = c.seq->id;
    batch_.seqs.resize(1);
    qwen35::SequenceChunk& sc = batch_.seqs[0];
    sc.tokens = c.tokens();
    sc.n_cached = c.start;
    sc.block_table = &c.seq->table;
    sc.state_slot = c.seq->slot->id;
    sc.logit_rows = c.samples ? 1 : 0;
    const kernels::Tensor* logits = nullptr;
    try {
      logits = &model_.forward(batch_);
    } catch (const std::exception& e) {
      fail_request(id, std::string("model rejected the request: ") + e.what());
      continue;
    }
    scheduler_.complete(c);
    save_snapshots();
    if (c.samples) sample_and_emit(std::span<const SequenceChunk>(&c, 1), *logits);
  }
}

void Engine::Core::save_snapshots() {
  for (const StateCopy& c : scheduler_.take_saves()) {
    try {
      model_.copy_state(c.from, c.to);
    } catch (const std::exception& e) {
      // The snapshot holds nothing usable: forget it; the sequence itself is unaffected.
      spdlog::warn("engine: a prefix-cache snapshot copy failed: {}", e.what());
      scheduler_.drop_snapshot(c.to);
    }
  }
}

void Engine::Core::sample_and_emit(std::span<const SequenceChunk> chunks, const kernels::Tensor& logits) {
  rows_.clear();
  grammar_failed_.clear();
  for (const SequenceChunk& c : chunks) {
    Live& l = live_.at(c.seq->id);
    rows_.push_back({&l.sampling, c.seq->prompt(), c.seq->generated(), &l.rng});
    if (l.constrained) {
      if (fill_grammar_mask(l))
        rows_.back().allowed = l.mask;
      else
        grammar_failed_.push_back(c.seq->id);
    }
  }
  sampled_.assign(rows_.size(), kernels::SampledToken{});
  try {
    sampler_->sample(logits, rows_, sampled_);
  } catch (const std::exception& e) {
    counters_.last_error = e.what();
    spdlog::error("engine: sampling failed for {} rows: {}", rows_.size(), e.what());
    for (const SequenceChunk& c : chunks) fail_request(c.seq->id, std::string("sampling error: ") + e.what());
    return;
  }
  const auto now = Clock::now();
  for (size_t i = 0; i < chunks.size(); ++i) {
    Sequence& seq = *chunks[i].seq;
    const RequestId id = seq.id;
    kernels::SampledToken& st = sampled_[i];
    if (std::find(grammar_failed_.begin(), grammar_failed_.end(), id) != grammar_failed_.end()) {
      fail_request(id, "the output's grammar allows no next token");
      continue;
    }
    if (st.token < 0) {
      fail_request(id, "the model produced no finite logits for this request");
      continue;
    }
    Live& l = live_.at(id);
    if (!advance_grammar(l, st.token)) {
      fail_request(id, "internal error: the grammar refused the token its own mask allowed");
      continue;
    }
    const std::optional<FinishReason> reason = scheduler_.append_token(seq, st.token);
    ++counters_.generated_tokens_total;
    ++l.metrics.generated_tokens;
    if (!l.has_token) {
      l.has_token = true;
      l.metrics.first_token = now;
    }
    RequestEvent e;
    e.token = st.token;
    e.cached_tokens = seq.cached_tokens;
    e.logprob = l.sampling.logprobs ? st.logprob : 0.0f;
    e.top_logprobs = std::move(st.top);
    e.time = now;
    if (reason) {
      e.finish = reason;
      if (*reason == FinishReason::stop) e.stop_token = st.token;
      end_request(id, std::move(e));
    } else {
      outbox_.emplace_back(l.stream, std::move(e));
    }
  }
}

bool Engine::Core::fill_grammar_mask(Live& l) {
  const auto t0 = Clock::now();
  const size_t words = static_cast<size_t>(l.matcher->grammar().vocabulary().mask_words());
  l.mask.resize(words);
  l.matcher->fill_next_token_bitmask(l.mask);
  counters_.grammar_mask_seconds_total += seconds_between(t0, Clock::now());
  ++counters_.grammar_masks_total;
  return std::any_of(l.mask.begin(), l.mask.end(), [](uint32_t w) { return w != 0; });
}

bool Engine::Core::advance_grammar(Live& l, int32_t token) {
  if (!l.matcher) return true;
  if (!l.constrained) {
    if (token == l.grammar_after) l.constrained = true;
    return true;
  }
  return l.matcher->accept_token(token);
}

void Engine::Core::end_request(RequestId id, RequestEvent e) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  Live& l = it->second;
  const auto now = Clock::now();
  if (e.time == Clock::time_point{}) e.time = now;
  RequestMetrics& m = l.metrics;
  m.finished = now;
  if (!l.has_token) m.first_token = now;
  if (!m.was_scheduled) m.first_scheduled = m.submitted;
  if (Sequence* seq = scheduler_.find(id)) {
    m.preemptions = seq->num_preemptions;
    m.cached_tokens = seq->cached_tokens;
    scheduler_.finish(*seq);  // blocks and slot back to the pools, now
  }
  switch (*e.finish) {
    case FinishReason::stop: ++counters_.requests_finished_stop_total; break;
    case FinishReason::length: ++counters_.requests_finished_length_total; break;
    case FinishReason::cancelled: ++counters_.requests_cancelled_total; break;
    case FinishReason::error: ++counters_.requests_failed_total; break;
  }
  if (l.queued) ++dequeued_;
  e.metrics = m;
  e.cached_tokens = m.cached_tokens;
  if (config_.on_finish) ended_.push_back({id, *e.finish, m});
  outbox_.emplace_back(std::move(l.stream), std::move(e));
  live_.erase(it);
}

void Engine::Core::fail_request(RequestId id, const std::string& error) {
  RequestEvent e;
  e.finish = FinishReason::error;
  e.error = error;
  end_request(id, std::move(e));
}

void Engine::Core::release_queue_slots() {
  if (dequeued_ == 0) return;
  std::lock_guard lock(shared_->mu);
  shared_->queued -= dequeued_;
  dequeued_ = 0;
}

void Engine::Core::publish(Shared& shared) {
  counters_.running = scheduler_.num_running();
  counters_.waiting = scheduler_.num_waiting();
  counters_.blocks_used = blocks_.num_used();
  counters_.slots_used = slots_.num_used();
  if (prefix_cache_) {
    const auto cs = prefix_cache_->stats();
    counters_.prefix_cache_blocks = cs.blocks;
    counters_.prefix_cache_evictable = cs.evictable_blocks;
    counters_.prefix_cache_snapshots = cs.snapshots;
    counters_.prefix_cache_snapshot_capacity = cs.snapshot_capacity;
    counters_.prefix_cache_queries_total = scheduler_.prefix_queries();
    counters_.prefix_cache_hits_total = scheduler_.prefix_hits();
  }
  size_t inbox = 0;
  {
    std::lock_guard lock(shared.mu);
    shared.queued -= dequeued_;
    dequeued_ = 0;
    counters_.requests_rejected_total = shared.rejected;
    inbox = shared.submissions.size();
  }
  std::lock_guard lock(shared.stats_mu);
  shared.stats = counters_;
  shared.stats.waiting += static_cast<int32_t>(inbox);
}

void Engine::Core::deliver() {
  // on_finish first: a client that has its final event (and then, say, scrapes /metrics) must
  // find its request already recorded. The callbacks are cheap (histogram updates).
  for (const Ended& e : ended_) {
    try {
      config_.on_finish(e.id, e.reason, e.metrics);
    } catch (const std::exception& ex) {
      spdlog::error("engine: on_finish callback threw: {}", ex.what());
    }
  }
  ended_.clear();
  for (auto& [stream, event] : outbox_) stream->push(std::move(event));
  outbox_.clear();
}

}  // namespace ds::scheduler
