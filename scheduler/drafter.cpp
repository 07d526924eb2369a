#include "scheduler/drafter.h"

#include <stdexcept>

#include "scheduler/ngram_drafter.h"

namespace ds::scheduler {

std::unique_ptr<Drafter> make_drafter(const SpeculativeConfig& config) {
  if (std::string e = config.validate(); !e.empty()) throw std::invalid_argument("speculative config: " + e);
  if (config.method == "ngram") return std::make_unique<NgramDrafter>(config.prompt_lookup_min, config.prompt_lookup_max);
  if (config.method == "mtp")
    throw std::invalid_argument("speculative config: the \"mtp\" drafter runs the model's MTP module: the engine makes it");
  throw std::invalid_argument("speculative config: no drafter for method \"" + config.method + "\"");
}

}  // namespace ds::scheduler
