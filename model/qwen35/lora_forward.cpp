// The model's LoRA steps (model.h, "LoRA adapters"): the slot pool, and the updates each
// adapted projection adds through the backend's gathered shrink and expand: one shrink for the
// projections of a layer that read one input (LoraSlots' groups), and one expand op for the
// group's adapted members (lora_expand_group; lora_expand for one alone).
#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "model/qwen35/model.h"
#include "model/qwen35/model_workspace.h"

namespace ds::qwen35 {

using kernels::Shape;
using kernels::Tensor;

void Model::enable_lora(int32_t num_slots, int64_t max_rank) {
  lora_.reset();
  lora_tmp_ = Tensor();
  lora_ = std::make_unique<LoraSlots>(*backend_, config_, num_slots, max_rank);
  ws_->rows = 0;  // the next step's workspace() sizes lora_tmp_ with the step's other buffers
}

void Model::install_lora(int32_t slot, const LoraAdapter& adapter) {
  if (!lora_) throw std::logic_error("Model::install_lora: enable_lora() has not been called");
  lora_->install(slot, adapter);
}

void Model::clear_lora(int32_t slot) {
  if (!lora_) throw std::logic_error("Model::clear_lora: enable_lora() has not been called");
  lora_->clear(slot);
}

void Model::note_lora_slots(std::span<const SequenceChunk> seqs) {
  step_lora_slots_.clear();
  const int32_t n = lora_ ? lora_->num_slots() : 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int32_t s = seqs[i].lora_slot;
    if (s < 0) continue;
    if (s >= n)
      throw std::invalid_argument("forward batch: sequence " + std::to_string(i) + " names LoRA slot " +
                                  std::to_string(s) + (n ? " outside the " + std::to_string(n) + " slots"
                                                         : " but no LoRA slots are enabled"));
    if (std::find(step_lora_slots_.begin(), step_lora_slots_.end(), s) == step_lora_slots_.end())
      step_lora_slots_.push_back(s);
  }
}

bool Model::lora_active(int64_t layer, LoraTarget t) const {
  if (!lora_ || layer < 0 || step_lora_slots_.empty()) return false;
  const LoraSlots::Site* site = lora_->site(layer, t);
  if (!site) return false;
  // A slot's sites it does not adapt hold zeros (LoraSlots), so applying them changes nothing.
  if (lora_every_site_) return true;
  return std::any_of(step_lora_slots_.begin(), step_lora_slots_.end(),
                     [&](int32_t s) { return site->used[static_cast<size_t>(s)]; });
}

void Model::apply_lora(int64_t layer, const Tensor& x, const kernels::BatchPlan& plan,
                       std::initializer_list<LoraOutput> outputs) {
  const LoraSlots::Site* first = nullptr;
  LoraTarget first_target{};
  for (const LoraOutput& o : outputs)
    if (lora_active(layer, o.target)) {
      first = lora_->site(layer, o.target);
      first_target = o.target;
      break;
    }
  if (!first || plan.num_rows() == 0) return;
  // One shrink for the group: its stacked A gives every member's ranks (zeros for a slot's
  // members it leaves alone) in the member's columns of tmp.
  const Tensor& a = lora_->group(*first).a;
  const int64_t T = plan.num_rows(), R = a.dim(1);
  if (lora_tmp_.numel() < T * R) throw std::logic_error("Model::apply_lora: the workspace was not sized for the step");
  Tensor tmp = lora_tmp_.rows(0, T * R).reshape(Shape{T, R});
  backend_->lora_shrink(x, a, plan, tmp);
  // The active members' expands, each from its ranks of tmp: one op for all of them, so a GPU
  // pays one launch's latency for the group (Backend::lora_expand_group).
  std::array<kernels::LoraExpandMember, kernels::Backend::kMaxLoraExpandMembers> members;
  size_t n = 0;
  for (const LoraOutput& o : outputs) {
    if (!lora_active(layer, o.target)) continue;
    const LoraSlots::Site& site = *lora_->site(layer, o.target);
    if (site.group != first->group)
      throw std::logic_error(std::string("Model::apply_lora: ") + lora_target_name(o.target) + " and " +
                             lora_target_name(first_target) + " are not one input group (lora_slots.h)");
    if (n == members.size()) throw std::logic_error("Model::apply_lora: more members than one expand takes");
    // Outputs arrive in the shapes the model computes them in; the update sees [rows, columns].
    members[n++] = {site.rank_offset, site.b, o.out.reshape(Shape{T, o.out.numel() / T}), o.col};
  }
  if (n == 1) {
    // A site alone keeps the plain op (its own name in the op profile).
    backend_->lora_expand(tmp, members[0].first_rank, members[0].b, plan, members[0].col_offset, members[0].out);
  } else {
    backend_->lora_expand_group(tmp, std::span<const kernels::LoraExpandMember>(members.data(), n), plan);
  }
}

}  // namespace ds::qwen35
