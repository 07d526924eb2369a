#include "scheduler/engine.h"

#include <algorithm>
#include <stdexcept>

#include "scheduler/engine_core.h"

namespace ds::scheduler {

Engine::Engine(ForwardModel& model, EngineConfig config, std::unique_ptr<kernels::Sampler> sampler,
               std::unique_ptr<Drafter> drafter)
    : config_(std::move(config)), shared_(std::make_shared<Shared>()) {
  const auto& sc = config_.scheduler;
  if (sc.max_num_seqs < 1) throw std::invalid_argument("engine: max_num_seqs must be >= 1");
  if (sc.max_num_batched_tokens < 1) throw std::invalid_argument("engine: max_num_batched_tokens must be >= 1");
  if (config_.max_queue < 0) throw std::invalid_argument("engine: max_queue must be >= 0");
  if (config_.max_ctx < 1) throw std::invalid_argument("engine: max_ctx must be >= 1");
  if (config_.block_size < 1) throw std::invalid_argument("engine: block_size must be >= 1");
  if (!sampler) throw std::invalid_argument("engine: no sampler");
  if (drafter && !config_.speculative.enabled())
    throw std::invalid_argument("engine: a drafter needs speculative.method (its name) and num_speculative_tokens");
  if (std::string e = config_.speculative.validate(drafter != nullptr); !e.empty())
    throw std::invalid_argument("engine: " + e);
  if (!drafter && config_.speculative.method == "mtp" && !model.has_mtp())
    throw std::invalid_argument("engine: speculative method \"mtp\" needs the model's MTP module, and this model was "
                                "loaded without one (qwen35::LoadOptions::mtp)");

  if (sc.max_loras < 0 || (sc.max_loras > 0 && config_.max_lora_rank < 1))
    throw std::invalid_argument("engine: max_loras must be >= 0 and max_lora_rank >= 1");
  // The adapter slots first: on a device they take memory the cache budget does not count.
  if (sc.max_loras > 0) model.enable_lora(sc.max_loras, config_.max_lora_rank);

  const int32_t states_per_seq =
      1 + (config_.speculative.enabled() ? config_.speculative.num_speculative_tokens : 0);
  sizes_ = kvcache::size_pools(model.cache_geometry(),
                               {.block_size = config_.block_size,
                                .max_num_seqs = sc.max_num_seqs,
                                .states_per_seq = states_per_seq,
                                .budget_bytes = config_.cache_bytes,
                                .reserve_tokens = config_.reserve_tokens,
                                .num_blocks = config_.num_blocks,
                                .num_slots = config_.num_slots,
                                .snapshot_bytes = config_.prefix_caching ? config_.snapshot_bytes : 0,
                                .num_snapshots = config_.prefix_caching ? std::max(0, config_.num_snapshots) : 0});
  // The contiguous baseline runs as many sequences as hold their reserve.
  if (config_.reserve_tokens > 0 && config_.cache_bytes > 0)
    config_.scheduler.max_num_seqs = std::min(sc.max_num_seqs, sizes_.num_slots / states_per_seq);
  // One sequence of max_ctx tokens must fit the pool, or the scheduler could not promise
  // progress (scheduler.h); a small pool lowers the limit instead of failing requests later.
  max_ctx_ = std::min<int64_t>(config_.max_ctx, sizes_.token_capacity());
  vocab_ = model.vocab_size();
  if (vocab_ < 1) throw std::invalid_argument("engine: the model reports an empty vocabulary");

  model.allocate_cache(sizes_);
  if (config_.host_cache_bytes < 0) throw std::invalid_argument("engine: host_cache_bytes must be >= 0");
  if (config_.host_cache_bytes > 0 && config_.prefix_caching) host_tier_ = model.allocate_host_cache(config_.host_cache_bytes);
  if (config_.step_graphs) {
    const int64_t k = config_.speculative.enabled() ? config_.speculative.num_speculative_tokens : 0;
    model.enable_step_graphs(max_ctx_ + k + 1, sc.max_num_seqs);
  }
  token_masks_ = sampler->applies_token_masks();
  has_vision_ = model.has_vision();
  core_ = std::make_unique<Core>(model, config_, sizes_, host_tier_, max_ctx_, std::move(sampler), std::move(drafter));
  {
    // What stats() shows before the first iteration.
    std::lock_guard lock(shared_->stats_mu);
    shared_->stats.blocks_total = sizes_.num_blocks;
    shared_->stats.block_size = sizes_.block_size;
    shared_->stats.slots_total = sizes_.num_slots;
    shared_->stats.prefix_caching = config_.prefix_caching;
    shared_->stats.prefix_cache_snapshot_capacity = sizes_.num_snapshots;
    shared_->stats.host_cache_block_capacity = host_tier_.sizes.blocks;
    shared_->stats.host_cache_snapshot_capacity = host_tier_.sizes.snapshots;
    shared_->stats.host_cache_capacity_bytes = int64_t{host_tier_.sizes.blocks} * host_tier_.block_bytes +
                                               int64_t{host_tier_.sizes.snapshots} * host_tier_.state_bytes;
    shared_->stats.max_ctx = max_ctx_;
  }
  thread_ = std::thread([core = core_.get(), shared = shared_.get()] { core->run(*shared); });
}

Engine::~Engine() { shutdown(); }

SubmitResult Engine::submit(Request request) {
  SubmitResult r;
  auto refuse = [&](SubmitStatus s, std::string m) {
    r.status = s;
    r.message = std::move(m);
    std::lock_guard lock(shared_->mu);
    ++shared_->rejected;
    return std::move(r);
  };
  const size_t n = request.prompt_size();
  if (n == 0) return refuse(SubmitStatus::invalid_request, "the prompt is empty");
  for (int32_t t : *request.prompt)
    if (t < 0 || t >= vocab_)
      return refuse(SubmitStatus::invalid_request, "prompt token id " + std::to_string(t) +
                                                       " is outside the vocabulary of " + std::to_string(vocab_));
  if (request.max_tokens < 1) return refuse(SubmitStatus::invalid_request, "max_tokens must be >= 1");
  if (std::string e = request.sampling.validate(vocab_); !e.empty())
    return refuse(SubmitStatus::invalid_request, e);
  if (request.grammar && !token_masks_)
    return refuse(SubmitStatus::invalid_request, "structured outputs are not supported by this backend's sampler yet");
  if (request.grammar && request.grammar->vocabulary().size() != vocab_)
    return refuse(SubmitStatus::invalid_request,
                  "the grammar was compiled for a vocabulary of " + std::to_string(request.grammar->vocabulary().size()) +
                      " tokens, not the model's " + std::to_string(vocab_));
  if (request.multimodal) {
    if (std::string e = check_multimodal(request); !e.empty()) return refuse(SubmitStatus::invalid_request, e);
  }
  if (request.lora || request.lora_id != 0) {
    if (config_.scheduler.max_loras < 1)
      return refuse(SubmitStatus::invalid_request, "LoRA adapters are not enabled on this server");
    if (!request.lora || request.lora_id == 0)
      return refuse(SubmitStatus::invalid_request, "a LoRA request needs both the adapter and its id");
    if (request.lora->config.rank > config_.max_lora_rank)
      return refuse(SubmitStatus::invalid_request, "the adapter's rank " + std::to_string(request.lora->config.rank) +
                                                       " is above max_lora_rank " +
                                                       std::to_string(config_.max_lora_rank));
  }
  if (request.thinking) {
    if (std::string e = request.thinking->validate(vocab_); !e.empty())
      return refuse(SubmitStatus::invalid_request, "thinking budget: " + e);
    if (request.thinking->limited() && !token_masks_)
      return refuse(SubmitStatus::invalid_request, "thinking budgets are not supported by this backend's sampler");
  }
  if (static_cast<int64_t>(n) > max_ctx_)
    return refuse(SubmitStatus::prompt_too_long,
                  "the prompt has " + std::to_string(n) + " tokens; the context limit is " + std::to_string(max_ctx_));

  auto stream = std::make_shared<RequestStream>();
  RequestId id;
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->stopping) {
      ++shared_->rejected;
      r.status = SubmitStatus::shutting_down;
      r.message = "the server is shutting down";
      return r;
    }
    if (shared_->queued >= config_.max_queue) {
      ++shared_->rejected;
      r.status = SubmitStatus::queue_full;
      r.message = "the waiting queue is full (" + std::to_string(config_.max_queue) + " requests)";
      return r;
    }
    id = shared_->next_id++;
    ++shared_->queued;
    shared_->submissions.push_back({id, std::move(request), stream, Clock::now()});
  }
  shared_->cv.notify_all();
  r.handle = RequestHandle(id, std::move(stream), std::weak_ptr<CancelSink>(shared_));
  return r;
}

std::string Engine::check_multimodal(const Request& r) const {
  const MultimodalInput& mm = *r.multimodal;
  if (!has_vision_) return "this model takes no images (it has no vision tower, or serve runs --language-model-only)";
  if (mm.images.size() != mm.layout.images.size()) return "the images and their places in the prompt disagree";
  const auto& prompt = *r.prompt;
  int64_t after = 0;
  const int64_t budget = config_.scheduler.encoder_budget();
  for (size_t k = 0; k < mm.images.size(); ++k) {
    const qwen35::PromptImageSpan& s = mm.layout.images[k];
    if (!mm.images[k].pixels || s.offset < after || s.offset + s.tokens() > static_cast<int64_t>(prompt.size()))
      return "an image's place in the prompt is out of order or outside it";
    if (s.tokens() > budget)
      return "an image of " + std::to_string(s.tokens()) + " tokens is more than the encoder's per-step budget of " +
             std::to_string(budget) + " (raise --max-num-batched-tokens or send a smaller image)";
    after = s.offset + s.tokens();
  }
  if (mm.layout.mrope.end != after || mm.layout.mrope.positions.size() != static_cast<size_t>(3 * after))
    return "the prompt's M-RoPE positions do not cover its images";
  return {};
}

void Engine::cancel(RequestId id) { shared_->cancel(id); }

EngineStats Engine::stats() const {
  std::lock_guard lock(shared_->stats_mu);
  return shared_->stats;
}

void Engine::shutdown(std::chrono::milliseconds drain) {
  {
    std::lock_guard lock(shared_->mu);
    if (!shared_->stopping) {
      shared_->stopping = true;
      shared_->drain_deadline = Clock::now() + drain;
    }
  }
  shared_->cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ds::scheduler
