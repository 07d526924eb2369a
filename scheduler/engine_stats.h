// EngineStats: a snapshot of the engine's gauges and counters, for /metrics and logs.
//
// Gauges describe the moment of the snapshot; *_total counters only grow. Per-request
// latencies (time to first token, inter-token, end-to-end, queue time) are not here: they
// come with each request's events (RequestEvent::time, RequestEvent::metrics), from which a
// server builds its histograms.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ds::scheduler {

struct EngineStats {
  // Gauges.
  int32_t running = 0;  // sequences holding a state slot
  int32_t waiting = 0;  // accepted, not running (queued, or preempted and waiting again)
  int32_t blocks_used = 0;
  int32_t blocks_total = 0;
  int32_t block_size = 0;
  int32_t slots_used = 0;
  int32_t slots_total = 0;
  int32_t prefix_cache_blocks = 0;     // blocks the prefix cache holds (some also in use)
  int32_t prefix_cache_evictable = 0;  // of those, held by the cache alone
  int32_t prefix_cache_snapshots = 0;
  int32_t prefix_cache_snapshot_capacity = 0;
  bool prefix_caching = false;
  int64_t max_ctx = 0;  // the context limit in force

  // Counters.
  int64_t requests_submitted_total = 0;  // accepted by submit()
  int64_t requests_rejected_total = 0;   // refused by submit() (any status)
  int64_t requests_finished_stop_total = 0;
  int64_t requests_finished_length_total = 0;
  int64_t requests_cancelled_total = 0;
  int64_t requests_failed_total = 0;
  int64_t prompt_tokens_total = 0;      // prompt tokens of requests, counted at first admission
  int64_t generated_tokens_total = 0;   // tokens sampled and delivered
  int64_t prefill_tokens_total = 0;     // tokens fed in prefill chunks, recomputation included
  int64_t decode_tokens_total = 0;      // tokens fed as decodes
  int64_t preemptions_total = 0;
  int64_t prefix_cache_queries_total = 0;  // tokens of admitted sequences looked up
  int64_t prefix_cache_hits_total = 0;     // of those, taken from the cache (either tier)
  // The prefix cache's host tier (kvcache/host_cache.h; zeros without one): what it holds,
  // sequences waiting on their loads, admissions that hit it and the tokens whose K/V they
  // loaded from it, what the device evicted into it and bytes copied each way, and the time
  // from a load's issue to the step that found it done (counts per bucket of
  // kHostLoadSeconds, the last for anything longer).
  static constexpr std::array<double, 11> kHostLoadSeconds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                              0.05,   0.1,   0.25,   0.5,   1.0};
  int32_t host_cache_blocks = 0;
  int32_t host_cache_block_capacity = 0;
  int32_t host_cache_snapshots = 0;
  int32_t host_cache_snapshot_capacity = 0;
  int32_t host_loading = 0;
  int32_t host_cache_pinned = 0;  // host blocks and snapshots read by loads in flight
  int64_t host_cache_bytes = 0;           // what the held blocks and snapshots take
  int64_t host_cache_capacity_bytes = 0;  // the tier's memory
  // The disk tier (scheduler/disk_tier.h; zeros without one): files written and their bytes,
  // writes that failed, files read back at start-up, files refused as untrusted, and what this
  // model's files take.
  int64_t disk_files_written_total = 0;
  int64_t disk_bytes_written_total = 0;
  int64_t disk_write_failures_total = 0;
  int64_t disk_files_loaded_total = 0;
  int64_t disk_files_refused_total = 0;
  int64_t disk_bytes = 0;
  int64_t host_cache_hits_total = 0;
  int64_t host_cache_hit_tokens_total = 0;
  int64_t host_cache_stored_blocks_total = 0;
  int64_t host_cache_stored_snapshots_total = 0;
  int64_t host_cache_offload_bytes_total = 0;
  int64_t host_cache_load_bytes_total = 0;
  std::array<int64_t, kHostLoadSeconds.size() + 1> host_load_buckets{};
  int64_t host_loads_total = 0;
  double host_load_seconds_total = 0;
  // Speculative decoding (vLLM's spec_decode counters): verify chunks, drafted tokens they
  // carried, drafted tokens accepted, and accepted ones by position in the draft (index i:
  // the (i+1)-th drafted token; as long as num_speculative_tokens).
  int32_t num_speculative_tokens = 0;  // K, 0 = off
  int64_t spec_decode_drafts_total = 0;
  int64_t spec_decode_draft_tokens_total = 0;
  int64_t spec_decode_accepted_tokens_total = 0;
  std::vector<int64_t> spec_decode_accepted_per_position;
  int64_t iterations_total = 0;         // forward steps
  int64_t forward_errors_total = 0;     // steps whose forward threw
  int64_t invariant_violations = 0;     // with EngineConfig::check_invariants
  double draft_seconds_total = 0;       // drafting (speculative decoding), before planning
  double schedule_seconds_total = 0;    // planning
  double forward_seconds_total = 0;     // the model call
  double sample_seconds_total = 0;      // sampling + bookkeeping of results
  double grammar_mask_seconds_total = 0;  // of that, filling structured outputs' token masks
  int64_t grammar_masks_total = 0;        // token masks filled
  // Images (scheduler/encoder_cache.h): images run through the vision encoder, its time (part
  // of forward_seconds_total), and the encoder cache (hits: an image's output found, its
  // encoding skipped; bytes: what the cache holds, within its capacity).
  int64_t images_encoded_total = 0;
  double encoder_seconds_total = 0;
  int64_t encoder_cache_hits_total = 0;
  int64_t encoder_cache_misses_total = 0;
  int64_t encoder_cache_evictions_total = 0;
  int64_t encoder_cache_bytes = 0;
  int64_t encoder_cache_capacity_bytes = 0;
  int32_t encoder_cache_entries = 0;
  // LoRA adapters (scheduler.h): slots, those pinned by running sequences now, and adapter
  // loads into slots (a miss of the slot pool: the weights copied from the host copy).
  int32_t lora_slots_total = 0;
  int32_t lora_slots_pinned = 0;
  int64_t lora_loads_total = 0;

  // The last step.
  int32_t last_batch_seqs = 0;
  int64_t last_batch_tokens = 0;
  std::string last_error;  // the most recent forward/sampling error message
};

}  // namespace ds::scheduler
