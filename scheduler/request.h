// What a client hands the engine (Request) and what it gets back (RequestEvent).
//
// A Request is cheap to copy: the prompt is shared, immutable, behind a shared_ptr, so the
// server's n > 1 (n requests with one prompt) copies a handful of small fields each. Give
// each copy its own seed (or none) if the n samples should differ.
//
// Events arrive in order on the request's stream (request_stream.h): one per generated
// token, the last one also carrying the finish reason. A request that ends without a new
// token (cancelled, failed, or a prompt that already fills max_ctx) gets one final event with
// token == -1. Every event is stamped with the engine's steady clock, and the final one
// carries RequestMetrics, so a server can build time-to-first-token, inter-token, end-to-end
// and queue-time histograms from the events alone.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/grammar/compiler.h"
#include "model/qwen35/lora_adapter.h"
#include "model/qwen35/multimodal.h"
#include "model/vision/processor.h"
#include "scheduler/sampling_params.h"
#include "scheduler/thinking_budget.h"

namespace ds::scheduler {

using Clock = std::chrono::steady_clock;
using RequestId = uint64_t;

// One image of a multimodal prompt, prepared by the server: its preprocessed pixels (what the
// model's vision encoder reads) and a content hash of them, the key of the engine's encoder
// cache and what the prefix cache sees in place of its pad tokens (scheduler.h).
struct RequestImage {
  std::shared_ptr<const vision::ProcessedImage> pixels;
  std::string hash;  // 32 bytes (SHA-256 of the preprocessed pixels and grid)
};

// A prompt's images: in prompt order, with where their pad tokens sit and the prompt's M-RoPE
// positions (model/qwen35/multimodal.h). The prompt holds each image's pads already expanded.
struct MultimodalInput {
  std::vector<RequestImage> images;
  qwen35::MultimodalPrompt layout;
};

struct Request {
  std::shared_ptr<const std::vector<int32_t>> prompt;  // token ids, at least one
  int64_t max_tokens = 16;                             // >= 1 generated tokens at most
  std::vector<int32_t> stop_token_ids;                 // finish (reason stop) on any of these
  bool ignore_eos = false;                             // do not stop on the model's eos ids
  SamplingParams sampling;
  // Prompt positions where later requests are likely to share the prefix (the end of a chat
  // prompt, which the next turn extends; the end of a system prompt): the prefix cache
  // snapshots the state at the block boundary at or before each (scheduler.h).
  std::vector<int64_t> cache_points;
  // Structured output: generated tokens must follow this grammar (compiled for the model's
  // vocabulary), sampled under its token masks; the eos ids and stop_token_ids are allowed
  // exactly where it can end. With grammar_after >= 0 the constraint starts after that
  // token is generated (a reasoning model's </think>), the token itself unconstrained.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  int32_t grammar_after = -1;
  // Images of the prompt (null: text only); the engine encodes them (ForwardModel) before the
  // chunks that reach their pads, and refuses them when the model has no vision tower.
  std::shared_ptr<const MultimodalInput> multimodal;
  // Reasoning (thinking_budget.h): the reply's thinking tags and its budget. With a budget,
  // once that many tokens were thought the reply is made to close the block (the close
  // sequence, sampled under one-token masks); without one (or null) nothing changes.
  std::shared_ptr<const ThinkingSpec> thinking;
  // A LoRA adapter (model/qwen35/lora_adapter.h) to run with, and its id: unique per loaded
  // adapter, never reused (scheduler/lora_residency.h). Null / 0: the base model. The engine
  // refuses one unless it runs with LoRA slots (SchedulerConfig::max_loras).
  std::shared_ptr<const qwen35::LoraAdapter> lora;
  uint64_t lora_id = 0;

  Request() = default;
  explicit Request(std::vector<int32_t> prompt_ids)
      : prompt(std::make_shared<const std::vector<int32_t>>(std::move(prompt_ids))) {}
  size_t prompt_size() const { return prompt ? prompt->size() : 0; }
};

enum class FinishReason : uint8_t { stop, length, cancelled, error };

inline std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
  }
  return "?";
}

// What the request cost and when things happened (steady clock), on the final event.
struct RequestMetrics {
  Clock::time_point submitted{};       // Engine::submit accepted it
  Clock::time_point first_scheduled{};  // first admitted to a batch (== submitted if never)
  Clock::time_point first_token{};      // first token emitted (== finished if none)
  Clock::time_point finished{};
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens taken from the prefix cache at the first admission
  int64_t generated_tokens = 0;
  int32_t preemptions = 0;  // times this request was preempted and recomputed
  bool was_scheduled = false;

  double queue_seconds() const { return seconds(submitted, first_scheduled); }
  double ttft_seconds() const { return seconds(submitted, first_token); }
  double e2e_seconds() const { return seconds(submitted, finished); }
  static double seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }
};

struct RequestEvent {
  int32_t token = -1;  // the generated token; -1 on a final event that brings none
  float logprob = 0;   // raw log-probability of token (when sampling.logprobs)
  std::vector<kernels::TokenLogprob> top_logprobs;  // sampling.top_logprobs best, best first
  Clock::time_point time{};  // when the engine emitted it (inter-token latency)
  int64_t cached_tokens = 0;  // prompt tokens the prefix cache supplied (set from the first token on)

  // Set on the last event only.
  std::optional<FinishReason> finish;
  // With finish == stop: the eos or stop token that ended the request (== token). The server
  // decides whether its text is shown.
  int32_t stop_token = -1;
  std::string error;  // with finish == error: what went wrong
  RequestMetrics metrics;  // filled on the last event

  bool is_final() const { return finish.has_value(); }
};

// Why submit() refused a request; each maps to one HTTP status in the server.
enum class SubmitStatus : uint8_t {
  ok,
  queue_full,       // the waiting queue holds max_queue requests (429, Retry-After)
  prompt_too_long,  // prompt longer than max_ctx (413 / OpenAI context_length_exceeded)
  invalid_request,  // empty prompt, token id outside the vocabulary, bad sampling params (400)
  shutting_down,    // the engine no longer admits requests (503)
};

inline std::string_view submit_status_name(SubmitStatus s) {
  switch (s) {
    case SubmitStatus::ok: return "ok";
    case SubmitStatus::queue_full: return "queue_full";
    case SubmitStatus::prompt_too_long: return "prompt_too_long";
    case SubmitStatus::invalid_request: return "invalid_request";
    case SubmitStatus::shutting_down: return "shutting_down";
  }
  return "?";
}

}  // namespace ds::scheduler
