#include "tests/model/harness.h"

#include <stdexcept>

namespace ds::test {

namespace {
std::unique_ptr<qwen35::Model> load_model(kernels::Backend& be, const std::filesystem::path& dir,
                                          int32_t num_blocks, int32_t block_size, int32_t num_slots,
                                          const qwen35::LoadOptions& options) {
  auto m = qwen35::Model::load(be, dir, options);
  kvcache::PoolSizes sizes;
  sizes.num_blocks = num_blocks;
  sizes.block_size = block_size;
  sizes.num_slots = num_slots;
  m->allocate_cache(sizes);
  return m;
}
}  // namespace

Harness::Harness(const std::filesystem::path& dir, int32_t num_blocks, int32_t block_size, int32_t num_slots,
                 const qwen35::LoadOptions& options, const kernels::cpu::CpuBackendOptions& backend_options)
    : backend_(kernels::cpu::make_cpu_backend(backend_options)),
      model_(load_model(*backend_, dir, num_blocks, block_size, num_slots, options)),
      blocks_(num_blocks, block_size),
      slots_(num_slots, model_->cache_geometry().state, model_->state_zero_fn()) {}

Harness::Seq& Harness::add_sequence() {
  seqs_.emplace_back(blocks_.block_size());
  auto slot = slots_.acquire();
  if (!slot) throw std::runtime_error("Harness: out of state slots");
  seqs_.back().slot = *slot;
  return seqs_.back();
}

void Harness::finish(Seq& s) {
  blocks_.free_table(s.table);
  slots_.release(s.slot);
}

std::vector<float> Harness::step(const std::vector<Part>& parts) {
  qwen35::ForwardBatch batch;
  for (const auto& p : parts) {
    auto r = blocks_.reserve(p.seq->table.blocks_needed(static_cast<int64_t>(p.tokens.size())));
    if (!r) throw std::runtime_error("Harness: out of K/V blocks");
    blocks_.commit(*r, p.seq->table);
    batch.seqs.push_back({p.tokens, p.seq->table.num_tokens(), p.seq->table.block_ids(), p.seq->slot.id, p.logit_rows});
    batch.seqs.back().lora_slot = p.lora_slot;
  }
  std::vector<float> out = model_->forward(batch).to_host();
  for (const auto& p : parts) p.seq->table.append_tokens(static_cast<int64_t>(p.tokens.size()));
  return out;
}

std::vector<float> Harness::prefill(Seq& s, const std::vector<int32_t>& tokens, int64_t chunk) {
  std::vector<float> all;
  for (size_t pos = 0; pos < tokens.size();) {
    const size_t n = chunk > 0 ? std::min<size_t>(static_cast<size_t>(chunk), tokens.size() - pos) : tokens.size() - pos;
    std::vector<int32_t> part(tokens.begin() + static_cast<std::ptrdiff_t>(pos),
                              tokens.begin() + static_cast<std::ptrdiff_t>(pos + n));
    auto l = step({{&s, part, static_cast<int32_t>(n)}});
    all.insert(all.end(), l.begin(), l.end());
    pos += n;
  }
  return all;
}

}  // namespace ds::test
