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
#include "scheduler/disk_tier.h"
#include "scheduler/drafter.h"
#include "scheduler/encoder_cache.h"
#include "scheduler/engine.h"
#include "scheduler/mtp_drafter.h"
#include "scheduler/scheduler.h"

namespace ds::scheduler {

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

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
    // Images (Request::multimodal): the prompt's, and the encoder output of each while the
    // prefill still reads it (engine_images.cpp).
    std::shared_ptr<const MultimodalInput> mm;
    std::vector<kernels::Tensor> image_embeds;
    // A thinking budget (Request::thinking, when limited): where the reply's reasoning stands.
    std::optional<ThinkingTracker> thinking;
    // Its LoRA adapter (Request::lora): what a slot is loaded with when the scheduler asks.
    std::shared_ptr<const qwen35::LoraAdapter> lora;
  };

  Core(ForwardModel& model, const EngineConfig& config, const kvcache::PoolSizes& sizes,
       const ForwardModel::HostTier& host, int64_t max_ctx, std::unique_ptr<kernels::Sampler> sampler,
       std::unique_ptr<Drafter> drafter);

  void run(Shared& shared);

 private:
  // The loop around the steps (engine_core.cpp).
  void intake(std::vector<Shared::Pending>& submissions);
  void apply_cancels(const std::vector<RequestId>& ids);
  void end_all(FinishReason reason, const std::string& error);
  // Ends a live request: final event, counters, and its sequence freed -- by the scheduler
  // now, or already by update() (`ended`, which the caller still holds).
  void end_request(RequestId id, RequestEvent event, const Sequence* ended = nullptr);
  void fail_request(RequestId id, const std::string& error, const Sequence* ended = nullptr);
  // Takes requests that left the waiting queue off Shared::queued (so max_queue frees up as
  // soon as a request is admitted, not at the end of the step).
  void release_queue_slots();
  void publish_stats(Shared& shared);
  void deliver();

  // One step (engine_step.cpp): draft -> schedule -> forward -> sample -> update -> publish.
  // False when the plan was empty.
  bool step();
  // Asks the drafter for the decoding sequences' drafts (speculative decoding).
  void propose_drafts();
  // The model over the plan; null when it failed (its requests are then retried alone or
  // failed here).
  const kernels::Tensor* forward(const StepPlan& plan);
  void retry_chunks_alone(const StepPlan& plan);
  // After a forward over `plan` (or part of it): sample its rows, let the scheduler settle
  // the step (Scheduler::update), run the snapshot copies it asked for, publish the tokens.
  void settle(const StepPlan& plan, const kernels::Tensor& logits);
  // Images (engine_images.cpp): the prefix cache's view and spans of a new request's prompt;
  // encoding the images this step's chunks reach (cache first), false when the encoder failed
  // (every request of the step is then failed here); the model's batch for a plan (an image
  // prompt's chunks get their image rows and M-RoPE positions); and letting go of images no
  // prefill reads.
  static SequenceImages sequence_images(const Request& r);
  bool prepare_images(const StepPlan& plan);
  // Copies the adapters of the sequences admitted into newly taken LoRA slots into those slots
  // (StepPlan::lora_loads); false when a copy failed (the requests on that slot are failed).
  bool load_loras(const StepPlan& plan);
  void load_batch(const StepPlan& plan);
  void release_images();
  std::string describe_step(const StepPlan& plan) const;

  // Sampling (engine_sampling.cpp): one row per sampling chunk, 1 + its drafts per verify
  // chunk, in the plan's order, into sampled_; a row whose request cannot be sampled (its
  // grammar allows no token, or the sampler failed) gets token -1 and its reason.
  void sample(const StepPlan& plan, const kernels::Tensor& logits);
  // The tokens row r of seq's chunk (after r of its drafted tokens) may take
  // (SampleRow::allowed): the request's grammar mask, then its thinking budget's forced token;
  // false when the grammar allows none. Whatever else constrains a request's next token
  // belongs here. mask_slot is the row's index into forced_masks_.
  bool fill_token_mask(Live& l, const Sequence& seq, int32_t r, size_t mask_slot, kernels::SampleRow& row);
  // A budgeted reply whose row r must close its thinking: the row may sample only the
  // forced token (one bit, or the grammar's mask where the grammar refuses it).
  void force_thinking(Live& l, const Sequence& seq, int32_t r, size_t mask_slot, kernels::SampleRow& row);
  // Fills a constrained request's token bitmask; false when its grammar allows no token.
  bool fill_grammar_mask(Live& l);
  // Advances a request's matcher past its sampled token; false when the grammar refuses it.
  bool advance_grammar(Live& l, int32_t token);
  // The outcome's tokens as events, and the requests it ended.
  void publish(const StepOutcome& outcome);
  void publish_update(const SequenceUpdate& u, Clock::time_point now);

  // The MTP drafter (mtp_drafter.h; engine_step.cpp): its chained drafts after planning, and
  // after the step one module step over the positions the forward computed. A failure costs
  // drafts, not output.
  void extend_mtp_drafts(const StepPlan& plan);
  // Before update(): what each chunk computed, while its sequence is there to read.
  void note_mtp_positions(const StepPlan& plan);
  // After publish(): the tokens each sampling chunk kept, then the module step.
  void mtp_catch_up(const StepOutcome& outcome);
  // Runs one of them, timed as drafting; a failure is logged and forgets every draft.
  void run_mtp(const char* what, const std::function<void()>& call);
  // Runs the snapshot copies the scheduler asked for after completed chunks.
  void save_snapshots();

  // The prefix cache's host tier (engine_host.cpp; scheduler.h, "Host tier"). Loading
  // sequences whose copies are done join the steps; the copies evictions asked for are queued
  // (device -> host) before anything reuses the memory they read; a plan's loads are queued
  // (host -> device) and their ticket given to their sequences; with nothing else to run, the
  // engine waits for a load (false: none in flight).
  void finish_loads();
  void flush_offloads();
  void start_loads(const StepPlan& plan);
  bool wait_for_a_load();
  // The disk tier (engine_host.cpp): opened, and its files read into the host tier, at
  // construction; offloaded entries stay pinned until their copies are done and the writer
  // has written them (wait: at shutdown, every pending write is finished first).
  void open_disk();
  void service_disk(bool wait);

  Shared* shared_ = nullptr;  // set by run()
  ForwardModel& model_;
  EngineConfig config_;
  int64_t max_ctx_;
  std::vector<int32_t> eos_ids_;
  kvcache::BlockPool blocks_;
  kvcache::StatePool slots_;
  ForwardModel::HostTier host_tier_;
  std::unique_ptr<kvcache::HostCache> host_cache_;      // before prefix_cache_: it outlives it
  std::unique_ptr<kvcache::PrefixCache> prefix_cache_;  // before scheduler_: it outlives it
  std::unordered_map<RequestId, Clock::time_point> load_started_;  // loads in flight
  std::unique_ptr<DiskTier> disk_;
  uint64_t disk_fingerprint_ = 0;
  std::vector<std::pair<uint64_t, std::vector<DiskTier::Job>>> pending_writes_;  // (offload ticket, its entries)
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
  EncoderCache encoder_cache_;

  // Per-step scratch.
  qwen35::ForwardBatch batch_;
  std::vector<std::vector<qwen35::EmbeddingRows>> chunk_rows_;  // image rows of batch_'s chunks
  std::vector<kernels::SampleRow> rows_;
  std::vector<kernels::SampledToken> sampled_;
  // Requests whose rows got no token, and why: a grammar that allows none, a sampler that
  // failed (a row the sampler itself leaves without one has no finite logits).
  std::vector<std::pair<RequestId, std::string>> unsampled_;
  std::vector<std::vector<uint32_t>> forced_masks_;   // rows' one-token masks (thinking budgets)
  std::vector<kernels::SamplerRng> row_rngs_;          // verify rows' generators
  std::vector<std::vector<int32_t>> histories_;        // verify chunks' generated + draft (penalties)
  std::vector<MtpDrafter::Computed> computed_;         // positions the forward computed (MTP)
  std::vector<size_t> computed_of_chunk_;              // sampling chunk -> its computed_ entry
};

}  // namespace ds::scheduler
