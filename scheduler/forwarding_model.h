// ForwardingModel: a ForwardModel that hands every call to another model, the base of
// wrappers that watch or change a few calls (the drafter benchmark's simulated verdict, the
// engine tests' gated and recording models). Forwarding lives here once so that a virtual
// added to ForwardModel reaches the wrapped model in every wrapper, instead of silently
// falling back to ForwardModel's "this model has none" default in the wrappers that forgot it.
#pragma once

#include "scheduler/forward_model.h"

namespace ds::scheduler {

class ForwardingModel : public ForwardModel {
 public:
  // `inner` must outlive this wrapper.
  explicit ForwardingModel(ForwardModel& inner) : inner_(inner) {}

  int64_t vocab_size() const override { return inner_.vocab_size(); }
  std::vector<int32_t> eos_token_ids() const override { return inner_.eos_token_ids(); }
  kvcache::CacheGeometry cache_geometry() const override { return inner_.cache_geometry(); }
  void allocate_cache(const kvcache::PoolSizes& sizes) override { inner_.allocate_cache(sizes); }
  void enable_step_graphs(int64_t max_seq_len, int32_t max_batch) override {
    inner_.enable_step_graphs(max_seq_len, max_batch);
  }
  kvcache::StatePool::ZeroFn state_zero_fn() override { return inner_.state_zero_fn(); }
  void copy_state(kvcache::SlotId from, kvcache::SlotId to) override { inner_.copy_state(from, to); }
  HostTier allocate_host_cache(int64_t bytes) override { return inner_.allocate_host_cache(bytes); }
  uint64_t transfer_host(std::span<const kvcache::BlockTransfer> blocks,
                         std::span<const kvcache::StateTransfer> states, bool to_host) override {
    return inner_.transfer_host(blocks, states, to_host);
  }
  void read_host_entry(kvcache::DiskEntryKind kind, int32_t host_id, std::span<uint8_t> out) override {
    inner_.read_host_entry(kind, host_id, out);
  }
  void write_host_entry(kvcache::DiskEntryKind kind, int32_t host_id, std::span<const uint8_t> in) override {
    inner_.write_host_entry(kind, host_id, in);
  }
  bool transfer_done(uint64_t ticket) override { return inner_.transfer_done(ticket); }
  void wait_transfer(uint64_t ticket) override { inner_.wait_transfer(ticket); }
  void order_after(uint64_t ticket) override { inner_.order_after(ticket); }
  const kernels::Tensor& forward(const qwen35::ForwardBatch& batch) override { return inner_.forward(batch); }
  bool has_mtp() const override { return inner_.has_mtp(); }
  const kernels::Tensor& forward_mtp(const qwen35::MtpBatch& batch) override { return inner_.forward_mtp(batch); }
  void enable_lora(int32_t num_slots, int64_t max_rank) override { inner_.enable_lora(num_slots, max_rank); }
  void install_lora(int32_t slot, const qwen35::LoraAdapter& adapter) override { inner_.install_lora(slot, adapter); }
  bool has_vision() const override { return inner_.has_vision(); }
  std::vector<kernels::Tensor> encode_images(std::span<const vision::ProcessedImage* const> images) override {
    return inner_.encode_images(images);
  }

 protected:
  ForwardModel& inner_;
};

}  // namespace ds::scheduler
