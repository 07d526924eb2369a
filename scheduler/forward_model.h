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
#include "kvcache/disk_entry.h"
#include "kvcache/host_cache.h"
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
  // The prefix cache's host tier (kvcache/host_cache.h), after allocate_cache: host memory for
  // as many K/V blocks and state snapshots as `bytes` holds (HostTierSizes::from_budget of this
  // model's block and state bytes), and copies between it and the pools, queued as the
  // backend's host transfers (kernels/backend.h): to_host reads blocks and slots after the ops
  // issued before, from host writes them beside the ops issued after; the ticket says when
  // they are done, and order_after puts later ops behind them. A model without one has none.
  struct HostTier {
    kvcache::HostTierSizes sizes;
    int64_t block_bytes = 0;  // one block of every attention layer's K and V
    int64_t state_bytes = 0;  // one state slot
  };
  virtual HostTier allocate_host_cache(int64_t bytes) {
    (void)bytes;
    throw std::invalid_argument("this model has no host tier");
  }
  virtual uint64_t transfer_host(std::span<const kvcache::BlockTransfer> blocks,
                                 std::span<const kvcache::StateTransfer> states, bool to_host) {
    (void)blocks;
    (void)states;
    (void)to_host;
    throw std::logic_error("this model has no host tier");
  }
  // The disk tier (disk_tier.h): a host entry's bytes, gathered into `out` (block: every
  // pool's block, in the model's order; snapshot: its state), or scattered from `in`. Host
  // memory only: read_host_entry is called on the disk tier's thread for pinned entries.
  virtual void read_host_entry(kvcache::DiskEntryKind kind, int32_t host_id, std::span<uint8_t> out) {
    (void)kind;
    (void)host_id;
    (void)out;
    throw std::logic_error("this model has no host tier");
  }
  virtual void write_host_entry(kvcache::DiskEntryKind kind, int32_t host_id, std::span<const uint8_t> in) {
    (void)kind;
    (void)host_id;
    (void)in;
    throw std::logic_error("this model has no host tier");
  }
  virtual bool transfer_done(uint64_t ticket) {
    (void)ticket;
    return true;
  }
  virtual void wait_transfer(uint64_t ticket) { (void)ticket; }
  virtual void order_after(uint64_t ticket) { (void)ticket; }
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
