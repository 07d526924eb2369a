#include "fake_model.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "kernels/cpu/sampler.h"

namespace ds::test {
namespace {

constexpr uint64_t kEmptyHash = 0x243F6A8885A308D3ull;

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t extend(uint64_t h, int32_t token) {
  return mix(h * 0x100000001B3ull + static_cast<uint64_t>(token) + 0x9E3779B97F4A7C15ull);
}

void fill_logits(uint64_t h, std::span<float> out) {
  for (size_t v = 0; v < out.size(); ++v) {
    const uint64_t r = mix(h ^ (0xD1B54A32D192ED03ull * (v + 1)));
    out[v] = static_cast<float>(r >> 40) * (8.0f / 16777216.0f) - 4.0f;  // [-4, 4)
  }
}

}  // namespace

FakeModel::FakeModel(int64_t vocab, std::vector<int32_t> eos) : vocab_(vocab), eos_(std::move(eos)) {}

kvcache::CacheGeometry FakeModel::cache_geometry() const {
  kvcache::CacheGeometry g;
  g.n_attention_layers = 1;
  g.n_kv_heads = 1;
  g.head_dim = 1;
  g.state.n_layers = 1;
  g.state.conv_dim = 1;
  g.state.conv_taps = 1;
  g.state.value_heads = 1;
  g.state.key_dim = 1;
  g.state.value_dim = 1;
  return g;
}

void FakeModel::allocate_cache(const kvcache::PoolSizes& sizes) {
  num_blocks_ = sizes.num_blocks;
  block_size_ = sizes.block_size;
  num_slots_ = sizes.num_slots + sizes.num_snapshots;
  kv_.assign(static_cast<size_t>(num_blocks_) * static_cast<size_t>(block_size_), -1);
  // Slots start as garbage: only the engine's zeroing may make them usable.
  slot_hash_.assign(static_cast<size_t>(num_slots_), 0xBADull);
  slot_count_.assign(static_cast<size_t>(num_slots_), -1000000);
}

kvcache::StatePool::ZeroFn FakeModel::state_zero_fn() {
  return [this](kvcache::SlotId s) {
    if (s < 0 || s >= num_slots_) throw std::out_of_range("fake model: zeroing a slot outside the pool");
    slot_hash_[static_cast<size_t>(s)] = kEmptyHash;
    slot_count_[static_cast<size_t>(s)] = 0;
    ++zero_calls_;
  };
}

void FakeModel::copy_state(kvcache::SlotId from, kvcache::SlotId to) {
  if (from < 0 || from >= num_slots_ || to < 0 || to >= num_slots_ || from == to)
    throw std::out_of_range("fake model: copying between slots outside the pool");
  slot_hash_[static_cast<size_t>(to)] = slot_hash_[static_cast<size_t>(from)];
  slot_count_[static_cast<size_t>(to)] = slot_count_[static_cast<size_t>(from)];
  ++copy_calls_;
}

void FakeModel::violation(const std::string& what) {
  if (violations_++ == 0) first_violation_ = what;
  throw std::logic_error("fake model contract violation: " + what);
}

const kernels::Tensor& FakeModel::forward(const qwen35::ForwardBatch& batch) {
  ++forward_calls_;
  if (on_forward) on_forward();
  // Validation first, as the real model does: nothing is touched when it throws.
  if (batch.seqs.empty()) throw std::invalid_argument("fake model: empty batch");
  std::vector<int32_t> slots;
  for (const auto& c : batch.seqs) {
    if (c.tokens.empty()) throw std::invalid_argument("fake model: empty chunk");
    if (c.state_slot < 0 || c.state_slot >= num_slots_) throw std::invalid_argument("fake model: slot outside the pool");
    if (static_cast<int64_t>(c.block_ids.size()) * block_size_ < c.n_cached + static_cast<int64_t>(c.tokens.size()))
      throw std::invalid_argument("fake model: block table too small");
    if (c.logit_rows < 0 || c.logit_rows > static_cast<int32_t>(c.tokens.size()))
      throw std::invalid_argument("fake model: bad logit_rows");
    for (int32_t t : c.tokens) {
      if (t < 0 || t >= vocab_) throw std::invalid_argument("fake model: token id outside the vocabulary");
      if (t == reject_token) throw std::invalid_argument("fake model: rejected token " + std::to_string(t));
    }
    for (kvcache::BlockId b : c.block_ids)
      if (b < 0 || b >= num_blocks_) throw std::invalid_argument("fake model: block outside the pool");
    if (c.row_state_slots.size() >= c.tokens.size())
      throw std::invalid_argument("fake model: more row states than rows but the last");
    for (kvcache::SlotId r : c.row_state_slots) {
      if (r < 0 || r >= num_slots_) throw std::invalid_argument("fake model: row-state slot outside the pool");
      slots.push_back(r);
    }
    int64_t previous = -1;
    for (const kernels::SnapshotRow& sr : c.snapshot_rows) {
      if (sr.row <= previous || sr.row + 1 >= static_cast<int64_t>(c.tokens.size()) || sr.slot < 0 ||
          sr.slot >= num_slots_ || !c.row_state_slots.empty())
        throw std::invalid_argument("fake model: bad snapshot row");
      previous = sr.row;
      slots.push_back(sr.slot);
      ++snapshot_rows_;
    }
    slots.push_back(c.state_slot);
  }
  std::sort(slots.begin(), slots.end());
  if (std::adjacent_find(slots.begin(), slots.end()) != slots.end())
    throw std::invalid_argument("fake model: two chunks share a state slot");

  max_batch_seqs_ = std::max<int64_t>(max_batch_seqs_, static_cast<int64_t>(batch.seqs.size()));
  max_batch_tokens_ = std::max(max_batch_tokens_, batch.num_tokens());
  logits_.assign(static_cast<size_t>(batch.num_logit_rows() * vocab_), 0.0f);
  size_t row = 0;
  for (const auto& c : batch.seqs) {
    const auto slot = static_cast<size_t>(c.state_slot);
    auto pos_index = [&](int64_t p) {
      const auto block = static_cast<size_t>(c.block_ids[static_cast<size_t>(p / block_size_)]);
      return block * static_cast<size_t>(block_size_) + static_cast<size_t>(p % block_size_);
    };
    if (slot_count_[slot] != c.n_cached)
      violation("slot " + std::to_string(slot) + " has consumed " + std::to_string(slot_count_[slot]) +
                " tokens, the chunk says " + std::to_string(c.n_cached));
    uint64_t h = kEmptyHash;
    for (int64_t p = 0; p < c.n_cached; ++p) h = extend(h, kv_[pos_index(p)]);
    if (h != slot_hash_[slot])
      violation("the K/V read through the block table does not match slot " + std::to_string(slot) + "'s state");
    const auto n = static_cast<int64_t>(c.tokens.size());
    for (int64_t i = 0; i < n; ++i) {
      if (c.tokens[static_cast<size_t>(i)] == crash_token) throw std::runtime_error("fake model: crashed mid-step");
      kv_[pos_index(c.n_cached + i)] = c.tokens[static_cast<size_t>(i)];
      h = extend(h, c.tokens[static_cast<size_t>(i)]);
      if (i < static_cast<int64_t>(c.row_state_slots.size())) {
        const auto r = static_cast<size_t>(c.row_state_slots[static_cast<size_t>(i)]);
        slot_hash_[r] = h;
        slot_count_[r] = c.n_cached + i + 1;
      }
      for (const kernels::SnapshotRow& sr : c.snapshot_rows) {
        if (sr.row != i) continue;
        slot_hash_[static_cast<size_t>(sr.slot)] = h;
        slot_count_[static_cast<size_t>(sr.slot)] = c.n_cached + i + 1;
      }
      if (i >= n - c.logit_rows) {
        std::span<float> out(logits_.data() + row * static_cast<size_t>(vocab_), static_cast<size_t>(vocab_));
        fill_logits(h, out);
        if (c.tokens[static_cast<size_t>(i)] == nan_token)
          std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
        ++row;
      }
    }
    slot_hash_[slot] = h;
    slot_count_[slot] = c.n_cached + n;
  }
  const auto rows = static_cast<int64_t>(row);
  logits_tensor_ = rows == 0 ? kernels::Tensor()
                             : kernels::Tensor(nullptr, logits_.data(), DType::f32, kernels::Shape{rows, vocab_});
  return logits_tensor_;
}

scheduler::ForwardModel::HostTier FakeModel::allocate_host_cache(int64_t bytes) {
  HostTier t;
  t.block_bytes = int64_t{block_size_} * 4;
  t.state_bytes = 16;
  t.sizes = kvcache::HostTierSizes::from_budget(bytes, t.block_bytes, t.state_bytes);
  host_blocks_ = t.sizes.blocks;
  host_slots_ = t.sizes.snapshots;
  // Garbage until something is stored: a load of a slot never stored breaks the checks.
  host_kv_.assign(static_cast<size_t>(host_blocks_) * static_cast<size_t>(block_size_), -7);
  host_hash_.assign(static_cast<size_t>(host_slots_), 0xBADull);
  host_count_.assign(static_cast<size_t>(host_slots_), -2000000);
  return t;
}

uint64_t FakeModel::transfer_host(std::span<const kvcache::BlockTransfer> blocks,
                                  std::span<const kvcache::StateTransfer> states, bool to_host) {
  for (const auto& b : blocks)
    if (b.device < 0 || b.device >= num_blocks_ || b.host < 0 || b.host >= host_blocks_)
      throw std::out_of_range("fake model: a block transfer outside the pools");
  for (const auto& s : states)
    if (s.device < 0 || s.device >= num_slots_ || s.host < 0 || s.host >= host_slots_)
      throw std::out_of_range("fake model: a state transfer outside the pools");
  const auto bs = static_cast<size_t>(block_size_);
  if (!to_host) {
    pending_loads_.push_back({(++load_tickets_) << 1, 0, {blocks.begin(), blocks.end()}, {states.begin(), states.end()}});
    return pending_loads_.back().ticket;
  }
  for (const auto& b : blocks)
    std::copy_n(kv_.begin() + static_cast<long>(static_cast<size_t>(b.device) * bs), bs,
                host_kv_.begin() + static_cast<long>(static_cast<size_t>(b.host) * bs));
  for (const auto& s : states) {
    host_hash_[static_cast<size_t>(s.host)] = slot_hash_[static_cast<size_t>(s.device)];
    host_count_[static_cast<size_t>(s.host)] = slot_count_[static_cast<size_t>(s.device)];
  }
  return ((++offload_tickets_) << 1) | 1;
}

bool FakeModel::transfer_done(uint64_t ticket) {
  if (ticket & 1) return true;  // offloads land at once
  for (PendingLoad& p : pending_loads_) {
    if (p.ticket > ticket) break;
    if (p.ticket == ticket && ++p.polls <= load_delay) return false;
  }
  land_loads(ticket);
  return true;
}

void FakeModel::read_host_entry(kvcache::DiskEntryKind kind, int32_t id, std::span<uint8_t> out) {
  if (kind == kvcache::DiskEntryKind::block) {
    if (id < 0 || id >= host_blocks_ || out.size() != static_cast<size_t>(block_size_) * 4)
      throw std::out_of_range("fake model: reading a host block outside the tier");
    std::memcpy(out.data(), host_kv_.data() + static_cast<size_t>(id) * static_cast<size_t>(block_size_), out.size());
    return;
  }
  if (id < 0 || id >= host_slots_ || out.size() != 16) throw std::out_of_range("fake model: reading a host slot outside the tier");
  std::memcpy(out.data(), &host_hash_[static_cast<size_t>(id)], 8);
  std::memcpy(out.data() + 8, &host_count_[static_cast<size_t>(id)], 8);
}

void FakeModel::write_host_entry(kvcache::DiskEntryKind kind, int32_t id, std::span<const uint8_t> in) {
  if (kind == kvcache::DiskEntryKind::block) {
    if (id < 0 || id >= host_blocks_ || in.size() != static_cast<size_t>(block_size_) * 4)
      throw std::out_of_range("fake model: writing a host block outside the tier");
    std::memcpy(host_kv_.data() + static_cast<size_t>(id) * static_cast<size_t>(block_size_), in.data(), in.size());
    return;
  }
  if (id < 0 || id >= host_slots_ || in.size() != 16) throw std::out_of_range("fake model: writing a host slot outside the tier");
  std::memcpy(&host_hash_[static_cast<size_t>(id)], in.data(), 8);
  std::memcpy(&host_count_[static_cast<size_t>(id)], in.data() + 8, 8);
}

void FakeModel::land_loads(uint64_t ticket) {
  if (ticket & 1) return;
  const auto bs = static_cast<size_t>(block_size_);
  while (!pending_loads_.empty() && pending_loads_.front().ticket <= ticket) {
    const PendingLoad& p = pending_loads_.front();
    for (const auto& b : p.blocks)
      std::copy_n(host_kv_.begin() + static_cast<long>(static_cast<size_t>(b.host) * bs), bs,
                  kv_.begin() + static_cast<long>(static_cast<size_t>(b.device) * bs));
    for (const auto& s : p.states) {
      slot_hash_[static_cast<size_t>(s.device)] = host_hash_[static_cast<size_t>(s.host)];
      slot_count_[static_cast<size_t>(s.device)] = host_count_[static_cast<size_t>(s.host)];
    }
    ++loads_landed_;
    pending_loads_.erase(pending_loads_.begin());
  }
}

std::vector<float> FakeModel::logits_after(const std::vector<int32_t>& history) const {
  uint64_t h = kEmptyHash;
  for (int32_t t : history) h = extend(h, t);
  std::vector<float> out(static_cast<size_t>(vocab_));
  fill_logits(h, out);
  return out;
}

std::vector<int32_t> FakeModel::reference_tokens(const std::vector<int32_t>& prompt, int64_t max_tokens,
                                                 const std::vector<int32_t>& stop_ids, int64_t max_ctx,
                                                 const scheduler::SamplingParams& params, uint64_t seed) const {
  auto sampler = kernels::cpu::make_cpu_sampler();
  kernels::SamplerRng rng(seed);
  std::vector<int32_t> history = prompt;
  std::vector<int32_t> out;
  while (static_cast<int64_t>(out.size()) < max_tokens && static_cast<int64_t>(history.size()) < max_ctx) {
    std::vector<float> logits = logits_after(history);
    kernels::Tensor t(nullptr, logits.data(), DType::f32, kernels::Shape{1, vocab_});
    kernels::SampleRow row{&params, std::span<const int32_t>(prompt),
                           std::span<const int32_t>(out), &rng};
    kernels::SampledToken st;
    sampler->sample(t, std::span<const kernels::SampleRow>(&row, 1), std::span<kernels::SampledToken>(&st, 1));
    out.push_back(st.token);
    history.push_back(st.token);
    if (std::find(stop_ids.begin(), stop_ids.end(), st.token) != stop_ids.end()) break;
  }
  return out;
}

}  // namespace ds::test
