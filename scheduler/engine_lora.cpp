// The engine's LoRA adapter loads (engine_core.h, load_loras).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "scheduler/engine_core.h"

namespace ds::scheduler {

bool Engine::Core::load_loras(const StepPlan& plan) {
  for (const StepPlan::LoraLoad& load : plan.lora_loads) {
    const auto it = live_.find(load.seq->id);
    try {
      if (it == live_.end() || !it->second.lora) throw std::logic_error("the request's adapter is gone");
      model_.install_lora(load.slot, *it->second.lora);
    } catch (const std::exception& e) {
      ++counters_.forward_errors_total;
      counters_.last_error = e.what();
      spdlog::error("engine: loading a LoRA adapter into slot {} failed: {}", load.slot, e.what());
      // Every request of the step fails (its batch is gone), and the slot holds nothing.
      for (const StepPlan::LoraLoad& l : plan.lora_loads) scheduler_.invalidate_lora_slot(l.slot);
      std::vector<RequestId> ids;
      for (const Sequence* s : plan.sequences) ids.push_back(s->id);
      // A request admitted from the host tier has no chunk this step but pinned its slot too.
      for (const StepPlan::LoraLoad& l : plan.lora_loads)
        if (std::find(ids.begin(), ids.end(), l.seq->id) == ids.end()) ids.push_back(l.seq->id);
      for (RequestId id : ids) fail_request(id, std::string("LoRA adapter load error: ") + e.what());
      return false;
    }
  }
  counters_.lora_loads_total += static_cast<int64_t>(plan.lora_loads.size());
  return true;
}

}  // namespace ds::scheduler
