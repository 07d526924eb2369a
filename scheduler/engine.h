// Engine: iteration-level continuous batching over one model.
//
// One engine thread owns the model, the block and slot pools, the scheduler (the policy, see
// scheduler.h) and the sampler. Each iteration it takes new requests and cancellations from
// an inbox, plans a step, runs one forward over all its chunks (decodes and prefill chunks
// together), samples the rows that end a chunk, appends the tokens, finishes what is done
// (freeing its blocks and slot in the same iteration) and only then delivers the events, so a
// client that has seen its final event also sees the pools without it in stats().
//
// submit(), cancel(), stats() and shutdown() may be called from any thread.
//
//   Engine engine(model, config, std::move(sampler));
//   auto r = engine.submit(Request({1, 2, 3}));
//   if (r.status != SubmitStatus::ok) -> 429 / 413 / 400 / 503 (see SubmitStatus)
//   while (auto e = r.handle.next()) { ... e->token ... e->finish ... }
//
// Failures stay with the requests that cause them: ids outside the vocabulary and bad
// sampling parameters are refused at submit; a forward that still rejects its batch
// (std::invalid_argument, thrown before any cache is written) is retried chunk by chunk and
// only the chunks that fail again end with reason error; any other exception from the model
// fails the requests of that batch (their caches may be half written); a row whose logits
// are not finite fails its request. The engine thread itself never dies of it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "kernels/sampler.h"
#include "kvcache/capacity.h"
#include "scheduler/drafter.h"
#include "scheduler/engine_config.h"
#include "scheduler/engine_stats.h"
#include "scheduler/forward_model.h"
#include "scheduler/request.h"
#include "scheduler/request_stream.h"

namespace ds::scheduler {

struct SubmitResult {
  SubmitStatus status = SubmitStatus::ok;
  std::string message;   // why, when refused (fit for an HTTP error body)
  RequestHandle handle;  // valid when ok
  bool ok() const { return status == SubmitStatus::ok; }
};

class Engine {
 public:
  // model must outlive the engine; sampler reads the logits where the model leaves them (the
  // composition root picks it: kernels/cpu's for host logits, kernels/cuda's for device
  // ones). drafter: speculative decoding's drafter, made by the composition root (with
  // config.speculative.method its name); null: the one config.speculative names, if any.
  // Sizes the cache pools (kvcache::size_pools: the one place, EngineConfig says from what),
  // allocates them (model.allocate_cache) and starts the engine thread. Throws
  // std::invalid_argument for a configuration that cannot run (no block, no slot,
  // non-positive limits, no sampler, a pool that holds not one sequence).
  Engine(ForwardModel& model, EngineConfig config, std::unique_ptr<kernels::Sampler> sampler,
         std::unique_ptr<Drafter> drafter = nullptr);
  ~Engine();  // shutdown(): cancels what is still running
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request. Never blocks on the engine thread.
  SubmitResult submit(Request request);
  // Cancels a request wherever it is (queued, prefilling, decoding); its stream gets a final
  // event with reason cancelled. Unknown or finished ids are ignored.
  void cancel(RequestId id);
  EngineStats stats() const;

  // Stops admitting (submit returns shutting_down), lets accepted requests run for up to
  // `drain`, cancels what is left, and joins the engine thread. Idempotent.
  void shutdown(std::chrono::milliseconds drain = std::chrono::milliseconds(0));

  // The configuration in force: as given, with max_num_seqs lowered to the sequences the
  // contiguous baseline's pool holds (EngineConfig::reserve_tokens).
  const EngineConfig& config() const { return config_; }
  // The context limit in force (config.max_ctx, lowered to the pool's token capacity).
  int64_t max_ctx() const { return max_ctx_; }
  int64_t vocab_size() const { return vocab_; }
  // Whether the model takes images (Request::multimodal).
  bool has_vision() const { return has_vision_; }
  const kvcache::PoolSizes& pool_sizes() const { return sizes_; }
  // The host tier the engine made (sizes zero when none).
  const ForwardModel::HostTier& host_tier() const { return host_tier_; }

 private:
  struct Shared;
  struct Core;
  // Why a request's images cannot run (empty when they can).
  std::string check_multimodal(const Request& r) const;

  EngineConfig config_;
  kvcache::PoolSizes sizes_;
  ForwardModel::HostTier host_tier_;
  int64_t max_ctx_ = 0;
  int64_t vocab_ = 0;
  bool token_masks_ = false;  // the sampler applies SampleRow::allowed (structured outputs)
  bool has_vision_ = false;
  std::shared_ptr<Shared> shared_;  // inbox + stats; handles hold it weakly to cancel
  std::unique_ptr<Core> core_;      // everything the engine thread owns
  std::thread thread_;
};

}  // namespace ds::scheduler
