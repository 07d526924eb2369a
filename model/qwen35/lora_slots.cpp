#include "model/qwen35/lora_slots.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ds::qwen35 {

using kernels::Shape;
using kernels::Tensor;

namespace {

// The sites that read one input (lora_slots.h), in the order their ranks stack in the group's A.
// The forward applies them together (model.cpp: run_attention, run_deltanet, run_mlp).
struct InputGroup {
  LoraTarget members[4];
  int count;
};
using T = LoraTarget;
constexpr InputGroup kInputGroups[] = {
    {{T::q_proj, T::k_proj, T::v_proj}, 3},
    {{T::o_proj}, 1},
    {{T::in_proj_qkv, T::in_proj_z, T::in_proj_b, T::in_proj_a}, 4},
    {{T::out_proj}, 1},
    {{T::gate_proj, T::up_proj}, 2},
    {{T::down_proj}, 1},
};

constexpr bool every_target_in_one_group() {
  int seen[kNumLoraTargets] = {};
  for (const InputGroup& g : kInputGroups)
    for (int i = 0; i < g.count; ++i) ++seen[static_cast<int>(g.members[i])];
  for (int n : seen)
    if (n != 1) return false;
  return true;
}
static_assert(every_target_in_one_group(), "every LoRA target needs exactly one input group");

}  // namespace

LoraSlots::LoraSlots(kernels::Backend& backend, const ModelConfig& config, int32_t num_slots, int64_t max_rank)
    : backend_(backend), config_(config), num_slots_(num_slots), max_rank_(max_rank) {
  if (num_slots < 1 || max_rank < 1)
    throw std::invalid_argument("LoRA slots: need at least one slot of rank >= 1 (got " + std::to_string(num_slots) +
                                " slots, rank " + std::to_string(max_rank) + ")");
  sites_.resize(static_cast<size_t>(config.num_layers * kNumLoraTargets));
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const bool full = config.layer_kinds[static_cast<size_t>(l)] == LayerKind::full_attention;
    for (const InputGroup& g : kInputGroups) {
      int64_t group_rank = 0, in = 0;
      for (int m = 0; m < g.count; ++m) {
        const LoraTargetShape s = lora_target_shape(config, g.members[m]);
        if (full ? !s.in_full_attention : !s.in_deltanet) continue;
        if (in != 0 && s.in != in) throw std::logic_error("LoRA slots: a group's sites read inputs of other widths");
        in = s.in;
        Site& site = sites_[static_cast<size_t>(l * kNumLoraTargets + static_cast<int>(g.members[m]))];
        site.group = static_cast<int32_t>(groups_.size());
        site.rank_offset = group_rank;
        site.rank = max_rank * s.rank_factor;
        site.b = backend.alloc(DType::f32, Shape{num_slots, s.out, site.rank});
        backend.fill_zero(site.b);
        site.used.assign(static_cast<size_t>(num_slots), false);
        bytes_ += site.b.numel() * 4;
        group_rank += site.rank;
      }
      if (group_rank == 0) continue;  // not this layer kind's
      Group& group = groups_.emplace_back();
      group.a = backend.alloc(DType::f32, Shape{num_slots, group_rank, in});
      backend.fill_zero(group.a);
      bytes_ += group.a.numel() * 4;
      max_group_rank_ = std::max(max_group_rank_, group_rank);
    }
  }
}

const LoraSlots::Site* LoraSlots::site(int64_t layer, LoraTarget t) const {
  if (layer < 0 || layer >= config_.num_layers) return nullptr;
  const Site& s = sites_[static_cast<size_t>(layer * kNumLoraTargets + static_cast<int>(t))];
  return s.group < 0 ? nullptr : &s;
}

LoraSlots::Site* LoraSlots::mutable_site(int64_t layer, LoraTarget t) {
  return const_cast<Site*>(site(layer, t));
}

Tensor LoraSlots::site_a(const Site& s, int32_t slot) const {
  const Tensor& a = group(s).a;
  return a.rows(slot, 1).reshape(Shape{a.dim(1), a.dim(2)}).rows(s.rank_offset, s.rank);
}

void LoraSlots::clear(int32_t slot) {
  if (slot < 0 || slot >= num_slots_)
    throw std::invalid_argument("LoRA slot " + std::to_string(slot) + " outside the " + std::to_string(num_slots_));
  for (Site& s : sites_) {
    if (s.group < 0 || !s.used[static_cast<size_t>(slot)]) continue;
    Tensor a = site_a(s, slot), b = s.b.rows(slot, 1);
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
    const int64_t R = s->rank;
    if (m.rank < 1 || m.rank > R || static_cast<int64_t>(m.a.size()) != m.rank * shape.in ||
        static_cast<int64_t>(m.b.size()) != shape.out * m.rank)
      throw std::invalid_argument(who + " does not fit the slot pool (rank " + std::to_string(m.rank) + ", pool rank " +
                                  std::to_string(R) + ")");
    // A: the first m.rank of the site's R rows in its group's A; B: [out, R] with the first
    // m.rank columns. clear() left the rest of both zero.
    Tensor a = site_a(*s, slot).rows(0, m.rank);
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
