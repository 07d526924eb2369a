// The engine thread: intake, cancellations, one step per iteration, event delivery.
#include <algorithm>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
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
      drafter_(config.speculative.method == "mtp"
                   ? std::make_unique<MtpDrafter>(model, *sampler_, config.speculative.acceptance_rate,
                                                  config.speculative.seed)
               : config.speculative.enabled() ? make_drafter(config.speculative, model.vocab_size())
                                              : nullptr),
      num_speculative_tokens_(config.speculative.enabled() ? config.speculative.num_speculative_tokens : 0),
      seeder_(std::random_device{}()) {
  mtp_ = dynamic_cast<MtpDrafter*>(drafter_.get());
  counters_.num_speculative_tokens = num_speculative_tokens_;
  counters_.spec_decode_accepted_per_position.assign(static_cast<size_t>(num_speculative_tokens_), 0);
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
    if (p.request.thinking && p.request.thinking->limited()) l.thinking.emplace(std::move(p.request.thinking));
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

namespace {

qwen35::SequenceChunk model_chunk(const SequenceChunk& c) {
  qwen35::SequenceChunk sc;
  sc.tokens = c.tokens();
  sc.n_cached = c.start;
  sc.block_table = &c.seq->table;
  sc.state_slot = c.seq->slot->id;
  sc.logit_rows = c.logit_rows();
  sc.row_state_slots = c.row_state_slots();
  sc.snapshot_rows = c.snapshot_rows();
  return sc;
}

}  // namespace

void Engine::Core::draft() {
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

bool Engine::Core::step() {
  draft();
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
  counters_.prefill_tokens_total += plan.num_tokens - plan.num_decodes - plan.num_draft_tokens;

  // The MTP module's steps count as drafting, not as the forward or sampling they sit between.
  const double drafting = counters_.draft_seconds_total;
  if (mtp_) extend_mtp_drafts(plan.chunks);
  batch_.seqs.clear();
  for (const SequenceChunk& c : plan.chunks) batch_.seqs.push_back(model_chunk(c));

  // Read before the step completes the chunks (which clears their snapshot rows).
  const std::string step_trace = spdlog::should_log(spdlog::level::debug) ? describe_step(plan) : std::string();
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
  counters_.forward_seconds_total += seconds_between(t1, t2) - (counters_.draft_seconds_total - drafting);

  const double drafted = counters_.draft_seconds_total;
  if (logits) after_forward(plan.chunks, *logits);
  counters_.sample_seconds_total += seconds_between(t2, Clock::now()) - (counters_.draft_seconds_total - drafted);
  if (!step_trace.empty())
    spdlog::debug("step {}: {:.1f} ms, {}", counters_.iterations_total, seconds_between(t1, Clock::now()) * 1e3, step_trace);

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

std::string Engine::Core::describe_step(const StepPlan& plan) const {
  // One line per step at --log-level debug, so a serving run's scheduling can be read back
  // (which prompts ran in which step, and what each step cost).
  std::string prefills;
  int64_t verify = 0;
  for (const SequenceChunk& c : plan.chunks) {
    if (c.num_draft > 0) ++verify;
    if (c.length == 1 + c.num_draft && c.start + c.length >= c.seq->prompt_len) continue;  // a decode or verify
    prefills += fmt::format(" {}:{}+{}{}{}", c.seq->id, c.start, c.length,
                            c.snapshot_rows().empty() ? "" : fmt::format("s{}", c.snapshot_rows().size()),
                            c.samples ? "*" : "");
  }
  return fmt::format("{} tokens, {} decodes ({} verify), {} admitted, {} preempted, {} waiting; prefill "
                     "id:start+len (sN: N snapshot rows, *: samples):{}",
                     plan.num_tokens, plan.num_decodes, verify, plan.admitted.size(), plan.preempted.size(),
                     scheduler_.num_waiting(), prefills);
}

void Engine::Core::retry_chunks_alone(std::vector<SequenceChunk> chunks) {
  for (const SequenceChunk& c : chunks) {
    const RequestId id = c.seq->id;
    batch_.seqs.assign(1, model_chunk(c));
    const kernels::Tensor* logits = nullptr;
    try {
      logits = &model_.forward(batch_);
    } catch (const std::exception& e) {
      fail_request(id, std::string("model rejected the request: ") + e.what());
      continue;
    }
    after_forward(std::span<const SequenceChunk>(&c, 1), *logits);
  }
}

void Engine::Core::after_forward(std::span<const SequenceChunk> chunks, const kernels::Tensor& logits) {
  sampling_.clear();
  sampling_rows_.clear();
  computed_.clear();
  int64_t row = 0;
  for (const SequenceChunk& c : chunks) {
    if (c.num_draft == 0) scheduler_.complete(c);  // verify chunks: once their drafts are judged
    if (c.samples) {
      sampling_.push_back(c);
      sampling_rows_.push_back(row);
    } else if (mtp_ && c.start + c.length < c.seq->num_tokens()) {
      // A prefill chunk that does not reach the last token: the tokens after it are known.
      MtpDrafter::Computed& m = computed_.emplace_back();
      m.id = c.seq->id;
      m.block_ids = c.seq->table.block_ids();
      m.slot = c.seq->slot->id;
      m.start = c.start;
      const auto first = c.seq->tokens.begin() + c.start;
      m.next_tokens.assign(first + 1, first + 1 + c.length);
      m.hidden_row = row;
    }
    row += c.length;
  }
  save_snapshots();
  if (!sampling_.empty()) sample_and_emit(sampling_, logits);
  if (mtp_ && !computed_.empty()) mtp_catch_up();
}

void Engine::Core::extend_mtp_drafts(std::span<const SequenceChunk> chunks) {
  // On failure the chunks keep their placeholder drafts, which verification rejects.
  run_mtp("draft", [&] { mtp_->extend(chunks); });
}

void Engine::Core::mtp_catch_up() {
  for (MtpDrafter::Computed& m : computed_)
    if (!live_.count(m.id)) m.goes_on = false;  // ended (or failed) in this step
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
  // One row per chunk, 1 + num_draft per verify chunk, in the logits' order.
  size_t n_rows = 0;
  for (const SequenceChunk& c : chunks) n_rows += static_cast<size_t>(c.logit_rows());
  rows_.clear();
  grammar_failed_.clear();
  row_rngs_.resize(n_rows);
  if (forced_masks_.size() < n_rows) forced_masks_.resize(n_rows);
  if (histories_.size() < chunks.size()) histories_.resize(chunks.size());
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const SequenceChunk& c = chunks[ci];
    Live& l = live_.at(c.seq->id);
    const std::span<const int32_t> generated = c.seq->generated();
    std::vector<int32_t>& history = histories_[ci];
    history.clear();
    if (c.num_draft > 0 && l.sampling.has_penalties()) {
      // Row i's penalties count the drafted tokens before it as generated.
      history.assign(generated.begin(), generated.end());
      history.insert(history.end(), c.seq->draft.begin(), c.seq->draft.end());
    }
    for (int32_t i = 0; i <= c.num_draft; ++i) {
      kernels::SampleRow row{&l.sampling, c.seq->prompt(), generated, &l.rng};
      if (c.num_draft > 0) {
        // Row i draws what the i-th token from now would draw without speculation: a copy of
        // the request's generator past the draws of the rows before it (one per row when
        // not greedy). The request's own generator advances once the accepted count is known.
        const size_t r = rows_.size();
        row_rngs_[r] = i == 0 ? l.rng : row_rngs_[r - 1];
        if (i > 0 && !l.sampling.greedy()) row_rngs_[r].next_u64();
        row.rng = &row_rngs_[r];
        if (!history.empty()) row.generated = std::span<const int32_t>(history).first(generated.size() + static_cast<size_t>(i));
      }
      // A constrained request never has a draft (draft()): its one row carries the mask.
      if (l.constrained) {
        if (fill_grammar_mask(l))
          row.allowed = l.mask;
        else
          grammar_failed_.push_back(c.seq->id);
      }
      if (l.thinking) force_thinking(l, c, i, row, rows_.size());
      rows_.push_back(row);
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
  size_t row = 0;
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const SequenceChunk& c = chunks[ci];
    const auto n = static_cast<size_t>(c.logit_rows());
    emit(c, std::span<kernels::SampledToken>(sampled_).subspan(row, n), now, sampling_rows_[ci]);
    row += n;
  }
}

void Engine::Core::emit(const SequenceChunk& c, std::span<kernels::SampledToken> sampled, Clock::time_point now,
                        int64_t hidden_row) {
  Sequence& seq = *c.seq;
  const RequestId id = seq.id;
  Live& l = live_.at(id);
  if (std::find(grammar_failed_.begin(), grammar_failed_.end(), id) != grammar_failed_.end()) {
    fail_request(id, "the output's grammar allows no next token");
    return;
  }
  // The draft is accepted as far as the target's own samples reproduce it: row i's sample is
  // the token after the pending one and the first i drafted ones, so the first row whose
  // sample differs from its draft gives the last token (greedy: the longest matching prefix;
  // sampled: a drafted token is kept with exactly the probability the target gives it, and a
  // rejected one is replaced by a draw from the target restricted to other tokens -- the
  // rejection sampling of a draft that is a single token, preserving the target's distribution).
  int32_t accepted = 0;
  if (const std::optional<int32_t> kept = c.num_draft > 0 ? drafter_->simulated_acceptance(c.num_draft) : std::nullopt) {
    // The benchmark's simulated verdict: the kept drafts stand in for the samples.
    accepted = *kept;
    for (int32_t i = 0; i < accepted; ++i) {
      kernels::SampledToken& st = sampled[static_cast<size_t>(i)];
      st.token = seq.draft[static_cast<size_t>(i)];
      st.logprob = std::numeric_limits<float>::quiet_NaN();
      st.top.clear();
    }
  } else {
    while (accepted < c.num_draft && sampled[static_cast<size_t>(accepted)].token == seq.draft[static_cast<size_t>(accepted)])
      ++accepted;
  }
  if (sampled[static_cast<size_t>(accepted)].token < 0) {
    fail_request(id, "the model produced no finite logits for this request");
    return;
  }
  // Tokens emitted: the accepted ones and the next, up to the first that finishes the request.
  int32_t n = 0;
  bool ends = false;
  while (n <= accepted) {
    ++n;
    ends = seq.finish.reason(sampled[static_cast<size_t>(n - 1)].token, seq.num_generated() + n,
                             seq.num_tokens() + n).has_value();
    if (ends) break;
  }
  if (mtp_) {
    // The positions this chunk computed: the chunk's own (a prefill or decode chunk) or its
    // pending token and accepted drafts (a verify chunk), each followed by a known token.
    MtpDrafter::Computed& m = computed_.emplace_back();
    m.id = id;
    m.block_ids = seq.table.block_ids();
    m.slot = seq.slot->id;
    m.start = c.start;
    if (c.num_draft == 0) {
      const auto first = seq.tokens.begin() + c.start;
      m.next_tokens.assign(first + 1, first + c.length);
    }
    for (int32_t i = c.num_draft == 0 ? n - 1 : 0; i < n; ++i) m.next_tokens.push_back(sampled[static_cast<size_t>(i)].token);
    m.hidden_row = hidden_row;
    m.goes_on = !ends;
  }
  if (c.num_draft > 0) {
    ++counters_.spec_decode_drafts_total;
    counters_.spec_decode_draft_tokens_total += c.num_draft;
    counters_.spec_decode_accepted_tokens_total += accepted;
    for (int32_t i = 0; i < accepted && i < num_speculative_tokens_; ++i)
      ++counters_.spec_decode_accepted_per_position[static_cast<size_t>(i)];
    scheduler_.complete_verified(c, n - 1);
    if (!l.sampling.greedy())
      for (int32_t i = 0; i < n; ++i) l.rng.next_u64();
  }
  for (int32_t i = 0; i < n; ++i) {
    kernels::SampledToken& st = sampled[static_cast<size_t>(i)];
    if (!advance_grammar(l, st.token)) {
      fail_request(id, "internal error: the grammar refused the token its own mask allowed");
      return;
    }
    if (l.thinking) l.thinking->accept(st.token);
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
      end_request(id, std::move(e));  // the sequence is gone: n made this the last token
      return;
    }
    outbox_.emplace_back(l.stream, std::move(e));
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

void Engine::Core::force_thinking(Live& l, const SequenceChunk& c, int32_t i, kernels::SampleRow& row,
                                  size_t mask_slot) {
  ThinkingTracker t = *l.thinking;
  for (int32_t j = 0; j < i; ++j) t.accept(c.seq->draft[static_cast<size_t>(j)]);
  const std::optional<int32_t> token = t.forced();
  if (!token) return;
  const auto word = static_cast<size_t>(*token) / 32;
  const uint32_t bit = 1u << (static_cast<uint32_t>(*token) % 32);
  // Under a grammar that refuses the forced token the grammar's mask stands (the tracker then
  // drops the rest of its close sequence).
  if (!row.allowed.empty() && (word >= row.allowed.size() || (row.allowed[word] & bit) == 0)) return;
  std::vector<uint32_t>& m = forced_masks_[mask_slot];
  m.assign(word + 1, 0u);  // the sampler treats the words past the span as all clear
  m[word] = bit;
  row.allowed = m;
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
    if (drafter_) {
      const bool completed = *e.finish == FinishReason::stop || *e.finish == FinishReason::length;
      drafter_->finished(id, seq->tokens, seq->prompt_len, completed);
    }
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
