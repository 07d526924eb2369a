// EngineConfig: the knobs of one Engine (what `serve` exposes as flags).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "scheduler/request.h"
#include "scheduler/scheduler.h"
#include "scheduler/speculative_config.h"

namespace ds::scheduler {

struct EngineConfig {
  // max_num_seqs (running sequences, each holding a state slot) and max_num_batched_tokens
  // (tokens per step: decodes plus prefill chunks).
  SchedulerConfig scheduler;
  // Requests waiting for their first admission; submit() beyond it is SubmitStatus::queue_full.
  int32_t max_queue = 1024;
  // Prompt + generated tokens of one request. A longer prompt is refused at submit; a
  // request that reaches it finishes with reason length. Lowered to the pool's token
  // capacity when the pool is smaller (Engine::max_ctx() says what holds).
  int64_t max_ctx = 4096;

  // Cache pools, sized by the engine alone with kvcache::size_pools (kvcache/capacity.h): with
  // cache_bytes > 0 from that budget (state slots for max_num_seqs first, at most half the
  // budget, the rest K/V blocks; or, with reserve_tokens > 0, the contiguous baseline of
  // reserve_tokens per sequence, which also lowers max_num_seqs to the sequences that fit);
  // otherwise num_blocks blocks and num_slots slots (0 = max_num_seqs). Engine::pool_sizes()
  // says what it made.
  int32_t block_size = 16;
  int64_t cache_bytes = 0;
  int64_t reserve_tokens = 0;
  int32_t num_blocks = 0;
  int32_t num_slots = 0;

  // Prefix caching (kvcache/prefix_cache.h, scheduler.h): full blocks of finished and
  // preempted sequences stay cached, and DeltaNet state snapshots live in slots of their own:
  // with cache_bytes, snapshot_bytes of the budget; otherwise num_snapshots slots.
  bool prefix_caching = false;
  int64_t snapshot_bytes = 0;
  int32_t num_snapshots = 0;
  // The host tier under it (kvcache/host_cache.h; serve --kv-offload-memory): host memory for
  // the blocks and snapshots the prefix cache evicts (split by HostTierSizes::from_budget);
  // 0 = none. Needs prefix_caching and a model that has one (ForwardModel::allocate_host_cache).
  int64_t host_cache_bytes = 0;
  // The disk tier under the host tier (scheduler/disk_tier.h; serve --kv-offload-dir): a
  // directory, and the fingerprint of the checkpoint and its cache types (the composition
  // root's; the engine adds the entries' sizes). Empty: none. Needs a host tier.
  std::string host_disk_dir;
  uint64_t host_disk_fingerprint = 0;

  // Images: the encoder cache's budget (scheduler/encoder_cache.h), in the model's memory.
  // The encoder's per-step budget is scheduler.max_encoder_tokens.
  int64_t encoder_cache_bytes = int64_t{256} << 20;

  // LoRA adapters (scheduler.h, "LoRA adapters"): scheduler.max_loras slots in the model, each
  // holding an adapter of rank up to max_lora_rank (serve --max-loras, --max-lora-rank).
  int64_t max_lora_rank = 16;

  // Speculative decoding (engine.h): off unless speculative.method is set. With K drafted
  // tokens a running sequence may hold 1 + K state slots, so the pools are sized for that.
  SpeculativeConfig speculative;

  // Called on the engine thread once per request as it ends (just before its final event is
  // delivered, so a client that saw its reply finds it counted), whether or not anyone still
  // reads its stream: the hook for request
  // histograms (end-to-end, queue time, TTFT, tokens) of a /metrics endpoint. It must be quick
  // and thread-safe; an exception from it is logged and ignored.
  std::function<void(RequestId, FinishReason, const RequestMetrics&)> on_finish;

  // Decode and verify steps replay recorded ones (CUDA graphs, kernels/step_graph.h) where
  // the model's backend records them; false runs every step eagerly (serve --enforce-eager,
  // and benchmarks that compare the two).
  bool step_graphs = true;
  // Checks the scheduler's bookkeeping against the pools after every step (tests); a
  // violation is counted in EngineStats::invariant_violations.
  bool check_invariants = false;
};

}  // namespace ds::scheduler
