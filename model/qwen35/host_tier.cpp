// The prefix cache's host tier on the model's side (model.h, "host tier"): host memory laid
// out as the pools, and the block and slot copies between them.
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/qwen35/model.h"

namespace ds::qwen35 {

using kernels::Tensor;

Model::HostTierLayout Model::allocate_host_cache(int64_t bytes) {
  if (k_pools_.empty() || conv_state_.empty())
    throw std::logic_error("allocate_host_cache: allocate the device cache first");
  host_ = {};
  const int64_t pool_block = k_pools_.front().rows(0, 1).bytes();
  const int64_t block_bytes = pool_block * static_cast<int64_t>(k_pools_.size() + v_pools_.size());
  const int64_t conv_bytes = conv_state_.rows(0, 1).bytes();
  const int64_t rec_bytes = recurrent_state_.rows(0, 1).bytes();
  const auto sizes = kvcache::HostTierSizes::from_budget(bytes, block_bytes, conv_bytes + rec_bytes);
  HostTierLayout layout{sizes, block_bytes, conv_bytes + rec_bytes};
  if (sizes.blocks == 0) return layout;
  const int64_t total = block_bytes * sizes.blocks + (conv_bytes + rec_bytes) * sizes.snapshots;
  host_.memory = backend_->alloc_host(total);
  host_.layout = layout;
  host_.pool_block_bytes = pool_block;
  char* p = static_cast<char*>(host_.memory.get());
  for (size_t i = 0; i < k_pools_.size() + v_pools_.size(); ++i, p += pool_block * sizes.blocks) host_.pools.push_back(p);
  host_.conv = p;
  host_.recurrent = p + conv_bytes * sizes.snapshots;
  return layout;
}

uint64_t Model::transfer_host(std::span<const kvcache::BlockTransfer> blocks,
                              std::span<const kvcache::StateTransfer> states, bool to_host) {
  const auto& sz = host_.layout.sizes;
  for (const auto& b : blocks)
    if (b.device < 0 || b.device >= num_blocks_ || b.host < 0 || b.host >= sz.blocks)
      throw std::out_of_range("transfer_host: block " + std::to_string(b.device) + " <-> host block " +
                              std::to_string(b.host) + " outside the pools");
  for (const auto& s : states)
    if (s.device < 0 || s.device >= num_slots_ || s.host < 0 || s.host >= sz.snapshots)
      throw std::out_of_range("transfer_host: state slot " + std::to_string(s.device) + " <-> host slot " +
                              std::to_string(s.host) + " outside the pools");
  // Pool by pool, block by block: consecutive blocks and host slots are adjacent in both
  // memories, and a device backend merges their copies.
  std::vector<kernels::Backend::HostCopy> copies;
  copies.reserve(blocks.size() * host_.pools.size() + 2 * states.size());
  const size_t n_k = k_pools_.size();
  for (size_t pool = 0; pool < host_.pools.size(); ++pool) {
    const Tensor& t = pool < n_k ? k_pools_[pool] : v_pools_[pool - n_k];
    for (const auto& b : blocks)
      copies.push_back({t.rows(b.device, 1), host_.pools[pool] + host_.pool_block_bytes * b.host});
  }
  const int64_t conv_bytes = conv_state_.rows(0, 1).bytes();
  const int64_t rec_bytes = recurrent_state_.rows(0, 1).bytes();
  for (const auto& s : states) copies.push_back({conv_state_.rows(s.device, 1), host_.conv + conv_bytes * s.host});
  for (const auto& s : states)
    copies.push_back({recurrent_state_.rows(s.device, 1), host_.recurrent + rec_bytes * s.host});
  return backend_->transfer(copies, to_host);
}

void Model::host_entry_bytes(bool block, int32_t id, uint8_t* out, const uint8_t* in) const {
  const auto& sz = host_.layout.sizes;
  if (id < 0 || id >= (block ? sz.blocks : sz.snapshots))
    throw std::out_of_range("host_entry_bytes: entry " + std::to_string(id) + " outside the host tier");
  auto copy_part = [&](char* at, int64_t n, int64_t& offset) {
    if (out) std::memcpy(out + offset, at, static_cast<size_t>(n));
    else std::memcpy(at, in + offset, static_cast<size_t>(n));
    offset += n;
  };
  int64_t offset = 0;
  if (block) {
    for (char* pool : host_.pools) copy_part(pool + host_.pool_block_bytes * id, host_.pool_block_bytes, offset);
    return;
  }
  const int64_t conv_bytes = conv_state_.rows(0, 1).bytes();
  const int64_t rec_bytes = recurrent_state_.rows(0, 1).bytes();
  copy_part(host_.conv + conv_bytes * id, conv_bytes, offset);
  copy_part(host_.recurrent + rec_bytes * id, rec_bytes, offset);
}

}  // namespace ds::qwen35
