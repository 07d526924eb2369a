// ForwardModel: what the engine asks of a model, so the engine can drive the real
// Qwen3.5 model (Qwen35ForwardModel) or a stand-in with the same contract (the scheduler
// tests' checking fake, the benchmark's zero-cost model).
//
// The contract is qwen35::Model's (model/qwen35/forward_batch.h): each chunk's table has room
// for its tokens, n_cached equals the tokens fed through the chunk's state slot since it was
// zeroed, no two chunks share a slot, and forward() returns [num_logit_rows, vocab] f32
// logits, rows in batch order, valid until the next forward. A malformed batch is
// std::invalid_argument thrown before any cache is touched; anything else thrown may have
// left the batch's caches half written.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "kvcache/capacity.h"
#include "kvcache/state_pool.h"
#include "model/qwen35/forward_batch.h"
#include "model/qwen35/lora_adapter.h"
#include "model/qwen35/mtp.h"
#include "model/vision/processor.h"

namespace ds::scheduler {

class ForwardModel {
 public:
  virtual ~ForwardModel() = default;

  virtual int64_t vocab_size() const = 0;
  // Ids that end generation unless a request sets ignore_eos (generation_config.json).
  virtual std::vector<int32_t> eos_token_ids() const = 0;
  virtual kvcache::CacheGeometry cache_geometry() const = 0;
  // Allocates the K/V pools and state slots the engine's BlockPool and StatePool index.
  virtual void allocate_cache(const kvcache::PoolSizes& sizes) = 0;
  // Recorded steps (kernels/step_graph.h: CUDA graphs) for steps of up to max_batch
  // sequences of up to max_seq_len tokens, where the model's backend records them; after
  // allocate_cache, which turns them off. A model without them ignores it.
  virtual void enable_step_graphs(int64_t max_seq_len, int32_t max_batch) {
    (void)max_seq_len;
    (void)max_batch;
  }
  // Zeroes one state slot; the engine installs it in its StatePool.
  virtual kvcache::StatePool::ZeroFn state_zero_fn() = 0;
  // Copies one state slot into another (prefix-cache snapshots: sizes.num_slots and beyond);
  // ordered after the forwards issued before it and before those issued after it.
  virtual void copy_state(kvcache::SlotId from, kvcache::SlotId to) = 0;
  // One step. The logits tensor lives in host memory readable by the CPU sampler.
  virtual const kernels::Tensor& forward(const qwen35::ForwardBatch& batch) = 0;
  // The MTP module (model/qwen35/mtp.h; speculative decoding's "mtp" method): whether the
  // model carries it, and one step of it, its logits where forward() puts its own.
  virtual bool has_mtp() const { return false; }
  virtual const kernels::Tensor& forward_mtp(const qwen35::MtpBatch& batch) {
    (void)batch;
    throw std::logic_error("this model has no MTP module");
  }
  // LoRA adapters (model/qwen35/lora_slots.h): a pool of slots of up to max_rank, and copying
  // an adapter into one (ordered like copy_state). A model without them refuses.
  virtual void enable_lora(int32_t num_slots, int64_t max_rank) {
    (void)num_slots;
    (void)max_rank;
    throw std::invalid_argument("this model takes no LoRA adapters");
  }
  virtual void install_lora(int32_t slot, const qwen35::LoraAdapter& adapter) {
    (void)slot;
    (void)adapter;
    throw std::logic_error("this model takes no LoRA adapters");
  }
  // The vision tower (model/qwen35/vision_encoder.h): whether the model has one, and the
  // encoder output of images, one [tokens, hidden] f32 tensor per image in the model's
  // memory (what qwen35::EmbeddingRows feed to a forward). Ordered like copy_state.
  virtual bool has_vision() const { return false; }
  virtual std::vector<kernels::Tensor> encode_images(std::span<const vision::ProcessedImage* const> images) {
    (void)images;
    throw std::logic_error("this model has no vision tower");
  }
};

}  // namespace ds::scheduler
