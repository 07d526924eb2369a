// The engine thread's loop: intake, cancellations, one step per iteration (engine_step.cpp),
// ending requests, stats and event delivery.
#include <algorithm>
#include <exception>
#include <spdlog/spdlog.h>
#include <stdexcept>

#include "scheduler/engine_core.h"

namespace ds::scheduler {

Engine::Core::Core(ForwardModel& model, const EngineConfig& config, const kvcache::PoolSizes& sizes,
                   const ForwardModel::HostTier& host, int64_t max_ctx, std::unique_ptr<kernels::Sampler> sampler,
                   std::unique_ptr<Drafter> drafter)
    : model_(model), config_(config), max_ctx_(max_ctx), eos_ids_(model.eos_token_ids()),
      blocks_(sizes.num_blocks, sizes.block_size),
      slots_(sizes.num_slots, model.cache_geometry().state, model.state_zero_fn()), host_tier_(host),
      host_cache_(config.prefix_caching && host.sizes.blocks > 0
                      ? std::make_unique<kvcache::HostCache>(host.sizes.blocks, host.sizes.snapshots, sizes.block_size)
                      : nullptr),
      prefix_cache_(config.prefix_caching ? std::make_unique<kvcache::PrefixCache>(blocks_, sizes.num_slots,
                                                                                   sizes.num_snapshots, host_cache_.get())
                                          : nullptr),
      scheduler_(config.scheduler, blocks_, slots_, prefix_cache_.get()), sampler_(std::move(sampler)),
      drafter_(drafter                                 ? std::move(drafter)
               : config.speculative.method == "mtp" ? std::make_unique<MtpDrafter>(model, *sampler_, config.speculative.draft_vocab_size,
                                                                                   config.speculative.draft_tokens)
               : config.speculative.enabled()       ? make_drafter(config.speculative)
                                                    : nullptr),
      num_speculative_tokens_(config.speculative.enabled() ? config.speculative.num_speculative_tokens : 0),
      seeder_(std::random_device{}()), encoder_cache_(config.encoder_cache_bytes) {
  mtp_ = dynamic_cast<MtpDrafter*>(drafter_.get());
  counters_.num_speculative_tokens = num_speculative_tokens_;
  counters_.spec_decode_accepted_per_position.assign(static_cast<size_t>(num_speculative_tokens_), 0);
  counters_.blocks_total = sizes.num_blocks;
  counters_.block_size = sizes.block_size;
  counters_.slots_total = sizes.num_slots;
  counters_.prefix_caching = config.prefix_caching;
  counters_.prefix_cache_snapshot_capacity = sizes.num_snapshots;
  counters_.max_ctx = max_ctx;
  counters_.host_cache_block_capacity = host.sizes.blocks;
  counters_.host_cache_snapshot_capacity = host.sizes.snapshots;
  counters_.host_cache_capacity_bytes =
      int64_t{host.sizes.blocks} * host.block_bytes + int64_t{host.sizes.snapshots} * host.state_bytes;
  // A loading sequence that ends or is preempted: later ops wait for the copies still writing
  // its blocks and slot (scheduler.h, "Host tier").
  scheduler_.set_load_fence([this](uint64_t ticket) { model_.order_after(ticket); });
  if (host_cache_ && !config.host_disk_dir.empty()) open_disk();
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
      // Idle, the loop still wakes now and then to publish its counters: the host and disk
      // tiers finish copies and writes on their own threads, after the last step published.
      shared.cv.wait_for(lock, stalled ? std::chrono::milliseconds(5) : std::chrono::milliseconds(100), ready);
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
    publish_stats(shared);
    deliver();
    if (stopping && !scheduler_.has_work() && live_.empty()) break;
  }
  try {
    // What the device cache holds goes down the tiers too, so a restart finds every prefix;
    // then everything offloaded is on disk before the engine stops.
    if (disk_ && prefix_cache_ && prefix_cache_->host()) {
      prefix_cache_->make_free(blocks_.num_blocks());
      flush_offloads();
    }
    service_disk(true);
  } catch (const std::exception& e) {
    spdlog::error("engine: finishing the disk tier's writes: {}", e.what());
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
    if (p.request.thinking && p.request.thinking->limited()) l.thinking.emplace(std::move(p.request.thinking));
    const RequestId id = p.id;
    SequenceImages images;
    if (p.request.multimodal) {
      images = sequence_images(p.request);
      l.mm = p.request.multimodal;
      l.image_embeds.resize(l.mm->images.size());
    }
    l.lora = p.request.lora;
    live_.emplace(id, std::move(l));
    if (static_cast<int64_t>(p.request.prompt_size()) >= max_ctx_) {
      // The prompt already fills the context: nothing can be generated.
      RequestEvent e;
      e.finish = FinishReason::length;
      end_request(id, std::move(e));
      continue;
    }
    scheduler_.add(id, std::vector<int32_t>(*p.request.prompt), std::move(finish), std::move(p.request.cache_points),
                   std::move(images), p.request.lora_id);
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

void Engine::Core::end_request(RequestId id, RequestEvent e, const Sequence* ended) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  Live& l = it->second;
  const auto now = Clock::now();
  if (e.time == Clock::time_point{}) e.time = now;
  RequestMetrics& m = l.metrics;
  m.finished = now;
  if (!l.has_token) m.first_token = now;
  if (!m.was_scheduled) m.first_scheduled = m.submitted;
  Sequence* running = ended ? nullptr : scheduler_.find(id);
  if (const Sequence* seq = ended ? ended : running) {
    m.preemptions = seq->num_preemptions;
    m.cached_tokens = seq->cached_tokens;
    if (drafter_) {
      const bool completed = *e.finish == FinishReason::stop || *e.finish == FinishReason::length;
      drafter_->finished(id, seq->tokens, seq->prompt_len, completed);
    }
  }
  if (running) scheduler_.finish(*running);  // blocks and slot back to the pools, now
  load_started_.erase(id);
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

void Engine::Core::fail_request(RequestId id, const std::string& error, const Sequence* ended) {
  RequestEvent e;
  e.finish = FinishReason::error;
  e.error = error;
  end_request(id, std::move(e), ended);
}

void Engine::Core::release_queue_slots() {
  if (dequeued_ == 0) return;
  std::lock_guard lock(shared_->mu);
  shared_->queued -= dequeued_;
  dequeued_ = 0;
}

void Engine::Core::publish_stats(Shared& shared) {
  counters_.running = scheduler_.num_running();
  counters_.waiting = scheduler_.num_waiting();
  counters_.blocks_used = blocks_.num_used();
  counters_.slots_used = slots_.num_used();
  counters_.lora_slots_total = scheduler_.lora_residency().num_slots();
  counters_.lora_slots_pinned = scheduler_.lora_residency().num_pinned();
  if (prefix_cache_) {
    const auto cs = prefix_cache_->stats();
    counters_.prefix_cache_blocks = cs.blocks;
    counters_.prefix_cache_evictable = cs.evictable_blocks;
    counters_.prefix_cache_snapshots = cs.snapshots;
    counters_.prefix_cache_snapshot_capacity = cs.snapshot_capacity;
    counters_.prefix_cache_queries_total = scheduler_.prefix_queries();
    counters_.prefix_cache_hits_total = scheduler_.prefix_hits();
  }
  if (host_cache_) {
    const auto hs = host_cache_->stats();
    counters_.host_cache_blocks = hs.blocks;
    counters_.host_cache_snapshots = hs.snapshots;
    counters_.host_cache_stored_blocks_total = hs.stored_blocks_total;
    counters_.host_cache_stored_snapshots_total = hs.stored_snapshots_total;
    counters_.host_loading = scheduler_.num_loading();
    counters_.host_cache_pinned = hs.pinned_blocks + hs.pinned_snapshots;
    counters_.host_cache_bytes =
        int64_t{hs.blocks} * host_tier_.block_bytes + int64_t{hs.snapshots} * host_tier_.state_bytes;
    counters_.host_cache_hits_total = scheduler_.host_hits();
    counters_.host_cache_hit_tokens_total = scheduler_.host_hit_tokens();
  }
  if (disk_) {
    const DiskTier::Stats ds = disk_->stats();
    counters_.disk_files_written_total = ds.files_written;
    counters_.disk_bytes_written_total = ds.bytes_written;
    counters_.disk_write_failures_total = ds.write_failures;
    counters_.disk_files_loaded_total = ds.files_loaded;
    counters_.disk_files_refused_total = ds.files_refused;
    counters_.disk_bytes = ds.bytes_on_disk;
  }
  const EncoderCacheStats& es = encoder_cache_.stats();
  counters_.encoder_cache_hits_total = es.hits_total;
  counters_.encoder_cache_misses_total = es.misses_total;
  counters_.encoder_cache_evictions_total = es.evictions_total;
  counters_.encoder_cache_bytes = es.bytes;
  counters_.encoder_cache_capacity_bytes = es.capacity_bytes;
  counters_.encoder_cache_entries = es.entries;
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
