#include "model/qwen35/device_budget.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "kvcache/block_pool.h"
#include "kvcache/block_table.h"

namespace ds::qwen35 {
namespace {

double gib(int64_t b) { return static_cast<double>(b) / (1 << 30); }

}  // namespace

std::string DeviceBudget::describe() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "device memory %.1f GiB: %.1f GiB in use after loading (weights, runtime), %.2f GiB activations "
                "for the largest step, %.1f GiB for the caches",
                gib(total_bytes), gib(in_use_bytes), gib(activation_bytes), gib(budget_bytes));
  return buf;
}

DeviceBudget measure_device_budget(Model& model, double utilization, int64_t max_batched_tokens,
                                   int32_t max_logit_rows, int32_t block_size) {
  auto& be = model.backend();
  if (!(utilization > 0 && utilization <= 1)) throw std::invalid_argument("gpu memory utilization must be in (0, 1]");
  if (max_batched_tokens < 1 || block_size < 1) throw std::invalid_argument("profiling step needs tokens and a block size");
  be.synchronize();
  const auto m0 = be.device_memory();
  if (m0.total_bytes <= 0)
    throw std::invalid_argument("the " + std::string(be.name()) + " backend has no device memory to size");
  DeviceBudget d;
  d.total_bytes = m0.total_bytes;
  d.in_use_bytes = m0.total_bytes - m0.free_bytes;

  // A temporary cache holding the one profiling sequence.
  kvcache::PoolSizes sizes;
  sizes.block_size = block_size;
  sizes.num_blocks = static_cast<int32_t>((max_batched_tokens + block_size - 1) / block_size);
  sizes.num_slots = 1;
  model.allocate_cache(sizes);
  be.synchronize();
  const auto m1 = be.device_memory();
  kvcache::BlockTable table(block_size);
  kvcache::BlockPool pool(sizes.num_blocks, block_size);
  auto r = pool.reserve(sizes.num_blocks);
  if (!r) throw std::logic_error("profiling: cannot reserve the temporary blocks");
  pool.commit(*r, table);
  std::vector<int32_t> tokens(static_cast<size_t>(max_batched_tokens), 0);
  ForwardBatch batch;
  const auto logit_rows = static_cast<int32_t>(std::min<int64_t>(std::max<int32_t>(max_logit_rows, 1), max_batched_tokens));
  batch.seqs.push_back({tokens, 0, table.block_ids(), 0, logit_rows});
  model.forward(batch);
  if (model.has_mtp()) {
    // The MTP module's own buffers over the same positions (its logits grow by a row per
    // drafting sequence beyond this one: about 1 MiB each at Qwen3.5's vocabulary).
    MtpBatch mtp;
    mtp.seqs.push_back({tokens, 0, table.block_ids(), 0, 0, true});
    model.forward_mtp(mtp);
  }
  be.synchronize();
  const auto m2 = be.device_memory();
  d.activation_bytes = std::max<int64_t>(0, m1.free_bytes - m2.free_bytes);
  d.budget_bytes = static_cast<int64_t>(utilization * static_cast<double>(d.total_bytes)) - d.in_use_bytes -
                   d.activation_bytes;
  if (d.budget_bytes <= 0)
    throw std::runtime_error("the model does not fit: " + d.describe() + " at utilization " + std::to_string(utilization) +
                             "; raise --gpu-memory-utilization or lower --max-num-batched-tokens");
  return d;
}

}  // namespace ds::qwen35
