#include "model/qwen35/lora_slots.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ds::qwen35 {

using kernels::Shape;
using kernels::Tensor;

LoraSlots::LoraSlots(kernels::Backend& backend, const ModelConfig& config, int32_t num_slots, int64_t max_rank)
    : backend_(backend), config_(config), num_slots_(num_slots), max_rank_(max_rank) {
  if (num_slots < 1 || max_rank < 1)
    throw std::invalid_argument("LoRA slots: need at least one slot of rank >= 1 (got " + std::to_string(num_slots) +
                                " slots, rank " + std::to_string(max_rank) + ")");
  sites_.resize(static_cast<size_t>(config.num_layers * kNumLoraTargets));
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const bool full = config.layer_kinds[static_cast<size_t>(l)] == LayerKind::full_attention;
    for (int t = 0; t < kNumLoraTargets; ++t) {
      const LoraTargetShape s = lora_target_shape(config, static_cast<LoraTarget>(t));
      if (full ? !s.in_full_attention : !s.in_deltanet) continue;
      const int64_t r = max_rank * s.rank_factor;
      Site& site = sites_[static_cast<size_t>(l * kNumLoraTargets + t)];
      site.a = backend.alloc(DType::f32, Shape{num_slots, r, s.in});
      site.b = backend.alloc(DType::f32, Shape{num_slots, s.out, r});
      backend.fill_zero(site.a);
      backend.fill_zero(site.b);
      site.used.assign(static_cast<size_t>(num_slots), false);
      bytes_ += (site.a.numel() + site.b.numel()) * 4;
      max_site_rank_ = std::max(max_site_rank_, r);
    }
  }
}

const LoraSlots::Site* LoraSlots::site(int64_t layer, LoraTarget t) const {
  if (layer < 0 || layer >= config_.num_layers) return nullptr;
  const Site& s = sites_[static_cast<size_t>(layer * kNumLoraTargets + static_cast<int>(t))];
  return s.a.empty() ? nullptr : &s;
}

LoraSlots::Site* LoraSlots::mutable_site(int64_t layer, LoraTarget t) {
  return const_cast<Site*>(site(layer, t));
}

void LoraSlots::clear(int32_t slot) {
  if (slot < 0 || slot >= num_slots_)
    throw std::invalid_argument("LoRA slot " + std::to_string(slot) + " outside the " + std::to_string(num_slots_));
  for (Site& s : sites_) {
    if (s.a.empty() || !s.used[static_cast<size_t>(slot)]) continue;
    Tensor a = s.a.rows(slot, 1), b = s.b.rows(slot, 1);
    backend_.fill_zero(a);
    backend_.fill_zero(b);
    s.used[static_cast<size_t>(slot)] = false;
  }
}

void LoraSlots::install(int32_t slot, const LoraAdapter& adapter) {
  clear(slot);
  for (const LoraModule& m : adapter.modules) {
    Site* s = mutable_site(m.layer, m.target);
    const LoraTargetShape shape = lora_target_shape(config_, m.target);
    const std::string who = adapter.source + ": layer " + std::to_string(m.layer) + " " + lora_target_name(m.target);
    if (!s) throw std::invalid_argument(who + " does not exist in this model");
    const int64_t R = s->a.dim(1);
    if (m.rank < 1 || m.rank > R || static_cast<int64_t>(m.a.size()) != m.rank * shape.in ||
        static_cast<int64_t>(m.b.size()) != shape.out * m.rank)
      throw std::invalid_argument(who + " does not fit the slot pool (rank " + std::to_string(m.rank) + ", pool rank " +
                                  std::to_string(R) + ")");
    // A: the first m.rank rows of the slot's [R, in]; B: [out, R] with the first m.rank columns.
    Tensor a = s->a.rows(slot, 1).reshape(Shape{R, shape.in}).rows(0, m.rank);
    backend_.copy_from_host(m.a, a);
    std::vector<float> b(static_cast<size_t>(shape.out * R), 0.0f);
    for (int64_t i = 0; i < shape.out; ++i)
      std::copy_n(m.b.begin() + i * m.rank, m.rank, b.begin() + i * R);
    Tensor bt = s->b.rows(slot, 1);
    backend_.copy_from_host(b, bt);
    s->used[static_cast<size_t>(slot)] = true;
  }
}

}  // namespace ds::qwen35
