// The inside of Engine (engine.h), private to engine*.cpp: the inbox shared with submitting
// threads, and the engine thread's loop with everything it owns.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kvcache/block_pool.h"
#include "kvcache/prefix_cache.h"
#include "kvcache/state_pool.h"
#include "model/grammar/matcher.h"
#include "scheduler/drafter.h"
#include "scheduler/engine.h"
#include "scheduler/mtp_drafter.h"
#include "scheduler/scheduler.h"

namespace ds::scheduler {

// What submitters and the engine thread share: the inbox, and the stats it publishes.
struct Engine::Shared final : CancelSink {
  struct Pending {
    RequestId id;
    Request request;
    std::shared_ptr<RequestStream> stream;
    Clock::time_point submitted;
  };

  std::mutex mu;  // guards everything down to `rejected`
  std::condition_variable cv;
  std::vector<Pending> submissions;
  std::vector<RequestId> cancels;
  bool stopping = false;
  Clock::time_point drain_deadline{};
  RequestId next_id = 1;
  int32_t queued = 0;    // accepted and never admitted (what max_queue bounds)
  int64_t rejected = 0;  // refused by submit()

  mutable std::mutex stats_mu;
  EngineStats stats;

  void cancel(RequestId id) override {
    {
      std::lock_guard lock(mu);
      cancels.push_back(id);
    }
    cv.notify_all();
  }
};

// The engine thread's world: the pools, the policy, the sampler, the live requests.
struct Engine::Core {
  struct Live {
    std::shared_ptr<RequestStream> stream;
    SamplingParams sampling;
    kernels::SamplerRng rng;
    RequestMetrics metrics;
    bool queued = true;      // still counted in Shared::queued
    bool has_token = false;  // first_token is set
    // Structured output (Request::grammar): the matcher, whether it constrains the next
    // token yet, the token that switches it on, and the row's token bitmask.
    std::unique_ptr<grammar::GrammarMatcher> matcher;
    bool constrained = false;
    int32_t grammar_after = -1;
    std::vector<uint32_t> mask;
    // A thinking budget (Request::thinking, when limited): where the reply's reasoning stands.
    std::optional<ThinkingTracker> thinking;
  };

  Core(ForwardModel& model, const EngineConfig& config, const kvcache::PoolSizes& sizes,
       int64_t max_ctx, std::unique_ptr<kernels::Sampler> sampler);

  void run(Shared& shared);

 private:
  void intake(std::vector<Shared::Pending>& submissions);
  void apply_cancels(const std::vector<RequestId>& ids);
  void end_all(FinishReason reason, const std::string& error);
  // One iteration: draft, plan, forward, sample, finish. False when the plan was empty.
  bool step();
  // Asks the drafter for the decoding sequences' drafts (speculative decoding).
  void draft();
  void retry_chunks_alone(std::vector<SequenceChunk> chunks);
  std::string describe_step(const StepPlan& plan) const;
  // After a forward over `chunks`: completes them, takes snapshots, samples and emits.
  void after_forward(std::span<const SequenceChunk> chunks, const kernels::Tensor& logits);
  void sample_and_emit(std::span<const SequenceChunk> chunks, const kernels::Tensor& logits);
  // Fills a constrained request's token bitmask; false when its grammar allows no token.
  bool fill_grammar_mask(Live& l);
  // Advances a request's matcher past its sampled token; false when the grammar refuses it.
  bool advance_grammar(Live& l, int32_t token);
  // A budgeted reply whose row i (after i drafted tokens) must close its thinking: the row
  // may sample only the forced token (row.allowed: one bit, or the grammar's mask where the
  // grammar refuses it). mask_slot is the row's index into forced_masks_.
  void force_thinking(Live& l, const SequenceChunk& c, int32_t i, kernels::SampleRow& row, size_t mask_slot);
  // A sampling chunk's result: its rows' samples judge its draft (if any), then the accepted
  // tokens are appended and emitted, up to the first that finishes the request.
  // hidden_row: the chunk's first row in the forward (the MTP module reads its hidden states).
  void emit(const SequenceChunk& chunk, std::span<kernels::SampledToken> sampled, Clock::time_point now,
            int64_t hidden_row);
  // The MTP drafter's two calls of a step (mtp_drafter.h); a failure costs drafts, not output.
  void extend_mtp_drafts(std::span<const SequenceChunk> chunks);
  void mtp_catch_up();
  // Runs one of them, timed as drafting; a failure is logged and forgets every draft.
  void run_mtp(const char* what, const std::function<void()>& call);
  // Runs the snapshot copies the scheduler asked for after completed chunks.
  void save_snapshots();
  // Ends a live request: final event, counters, frees its sequence (when it has one).
  void end_request(RequestId id, RequestEvent event);
  void fail_request(RequestId id, const std::string& error);
  // Takes requests that left the waiting queue off Shared::queued (so max_queue frees up as
  // soon as a request is admitted, not at the end of the step).
  void release_queue_slots();
  void publish(Shared& shared);
  void deliver();

  Shared* shared_ = nullptr;  // set by run()
  ForwardModel& model_;
  EngineConfig config_;
  int64_t max_ctx_;
  std::vector<int32_t> eos_ids_;
  kvcache::BlockPool blocks_;
  kvcache::StatePool slots_;
  std::unique_ptr<kvcache::PrefixCache> prefix_cache_;  // before scheduler_: it outlives it
  Scheduler scheduler_;
  std::unique_ptr<kernels::Sampler> sampler_;
  std::unique_ptr<Drafter> drafter_;  // null: no speculative decoding
  MtpDrafter* mtp_ = nullptr;         // drafter_, when it is the MTP module's
  int32_t num_speculative_tokens_ = 0;
  std::mt19937_64 seeder_;  // seeds for requests that bring none
  std::unordered_map<RequestId, Live> live_;
  // This iteration's events, delivered once pools and stats are up to date.
  std::vector<std::pair<std::shared_ptr<RequestStream>, RequestEvent>> outbox_;
  struct Ended {
    RequestId id;
    FinishReason reason;
    RequestMetrics metrics;
  };
  std::vector<Ended> ended_;  // for config_.on_finish, called before the outbox is delivered
  EngineStats counters_;
  int32_t dequeued_ = 0;  // requests that left Shared::queued since the last publish

  // Per-step scratch.
  qwen35::ForwardBatch batch_;
  std::vector<SequenceChunk> sampling_;
  std::vector<kernels::SampleRow> rows_;
  std::vector<kernels::SampledToken> sampled_;
  std::vector<RequestId> grammar_failed_;  // constrained rows whose grammar allowed nothing
  std::vector<std::vector<uint32_t>> forced_masks_;  // rows' one-token masks (thinking budgets)
  std::vector<kernels::SamplerRng> row_rngs_;          // verify rows' generators
  std::vector<std::vector<int32_t>> histories_;        // verify chunks' generated + draft (penalties)
  std::vector<int64_t> sampling_rows_;                 // sampling_'s first rows in the forward
  std::vector<MtpDrafter::Computed> computed_;         // positions the forward computed (MTP)
};

}  // namespace ds::scheduler
