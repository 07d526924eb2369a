// Qwen35ForwardModel: a loaded qwen35::Model behind the engine's ForwardModel interface.
//
// Logits stay where the model put them when its backend computes on the host, or when the
// engine samples on the device (logits_in_place: a device sampler such as
// kernels/cuda/cuda_sampler.h reads them there); otherwise they are copied to host memory once
// per step for the CPU sampler.
#pragma once

#include <vector>

#include "model/qwen35/model.h"
#include "model/qwen35/vision_encoder.h"
#include "scheduler/forward_model.h"

namespace ds::scheduler {

class Qwen35ForwardModel final : public ForwardModel {
 public:
  // model (and encoder, the vision tower when the model is served with one) must outlive
  // this adapter.
  explicit Qwen35ForwardModel(qwen35::Model& model, bool logits_in_place = false,
                              qwen35::VisionEncoder* encoder = nullptr);

  int64_t vocab_size() const override { return model_.config().vocab_size; }
  std::vector<int32_t> eos_token_ids() const override { return model_.config().eos_token_ids; }
  kvcache::CacheGeometry cache_geometry() const override { return model_.cache_geometry(); }
  void allocate_cache(const kvcache::PoolSizes& sizes) override { model_.allocate_cache(sizes); }
  void enable_step_graphs(int64_t max_seq_len, int32_t max_batch) override {
    model_.enable_step_graphs({.max_seq_len = max_seq_len, .max_batch = max_batch});
  }
  kvcache::StatePool::ZeroFn state_zero_fn() override { return model_.state_zero_fn(); }
  void copy_state(kvcache::SlotId from, kvcache::SlotId to) override { model_.copy_state_slot(from, to); }
  HostTier allocate_host_cache(int64_t bytes) override;
  uint64_t transfer_host(std::span<const kvcache::BlockTransfer> blocks, std::span<const kvcache::StateTransfer> states,
                         bool to_host) override {
    return model_.transfer_host(blocks, states, to_host);
  }
  void read_host_entry(kvcache::DiskEntryKind kind, int32_t host_id, std::span<uint8_t> out) override {
    model_.host_entry_bytes(kind == kvcache::DiskEntryKind::block, host_id, out.data(), nullptr);
  }
  void write_host_entry(kvcache::DiskEntryKind kind, int32_t host_id, std::span<const uint8_t> in) override {
    model_.host_entry_bytes(kind == kvcache::DiskEntryKind::block, host_id, nullptr, in.data());
  }
  bool transfer_done(uint64_t ticket) override { return model_.backend().transfer_done(ticket); }
  void wait_transfer(uint64_t ticket) override { model_.backend().wait_transfer(ticket); }
  void order_after(uint64_t ticket) override { model_.backend().order_after(ticket); }
  const kernels::Tensor& forward(const qwen35::ForwardBatch& batch) override;
  bool has_mtp() const override { return model_.has_mtp(); }
  const kernels::Tensor& forward_mtp(const qwen35::MtpBatch& batch) override;
  void enable_lora(int32_t num_slots, int64_t max_rank) override { model_.enable_lora(num_slots, max_rank); }
  void install_lora(int32_t slot, const qwen35::LoraAdapter& adapter) override { model_.install_lora(slot, adapter); }
  bool has_vision() const override { return encoder_ != nullptr; }
  std::vector<kernels::Tensor> encode_images(std::span<const vision::ProcessedImage* const> images) override;

  qwen35::Model& model() { return model_; }

 private:
  const kernels::Tensor& readable(const qwen35::Logits& logits);

  qwen35::Model& model_;
  qwen35::VisionEncoder* encoder_;
  bool host_logits_;
  kernels::Tensor host_;  // the copy, for a device backend
};

}  // namespace ds::scheduler
