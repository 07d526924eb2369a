#include "model/qwen35/lora_config.h"

#include <cmath>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "model/grammar/json_nesting.h"

namespace ds::qwen35 {

double LoraConfig::scale() const {
  return use_rslora ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / static_cast<double>(rank);
}

LoraConfig LoraConfig::parse(std::string_view text, const std::string& source) {
  auto fail = [&](const std::string& what) -> void { throw std::runtime_error(source + ": " + what); };
  if (text.size() > kMaxBytes)
    fail("is " + std::to_string(text.size()) + " bytes, above the limit of " + std::to_string(kMaxBytes));
  if (grammar::json_nests_deeper(text, kMaxDepth))
    fail("nests deeper than " + std::to_string(kMaxDepth) + " levels");
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) fail("is not valid JSON");
  if (!j.is_object()) fail("is not a JSON object");
  auto get = [&](const char* key) -> const nlohmann::json* {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  };
  auto truthy = [&](const char* key) {
    const nlohmann::json* v = get(key);
    if (!v) return false;
    if (v->is_boolean()) return v->get<bool>();
    if (v->is_string()) return !v->get<std::string>().empty();
    if (v->is_array() || v->is_object()) return !v->empty();
    fail(std::string("\"") + key + "\" has an unexpected type: " + v->dump());
    return false;
  };

  LoraConfig c;
  if (const auto* t = get("peft_type"); t && (!t->is_string() || t->get<std::string>() != "LORA"))
    fail("peft_type " + t->dump() + " is not \"LORA\" (only LoRA adapters are served)");
  const nlohmann::json* r = get("r");
  if (!r || !r->is_number_integer() || r->get<int64_t>() <= 0 || r->get<int64_t>() > (int64_t{1} << 20))
    fail("\"r\" must be a positive integer, got " + (r ? r->dump() : std::string("nothing")));
  c.rank = r->get<int64_t>();
  const nlohmann::json* alpha = get("lora_alpha");
  if (alpha) {
    if (!alpha->is_number() || !(alpha->get<double>() > 0) || !std::isfinite(alpha->get<double>()))
      fail("\"lora_alpha\" must be a positive number, got " + alpha->dump());
    c.alpha = alpha->get<double>();
  } else {
    c.alpha = 8;  // PEFT's default
  }
  if (const auto* v = get("use_rslora")) {
    if (!v->is_boolean()) fail("\"use_rslora\" must be true or false, got " + v->dump());
    c.use_rslora = v->get<bool>();
  }
  if (truthy("use_dora")) fail("DoRA adapters (use_dora) are not supported");
  if (const auto* b = get("bias"); b && (!b->is_string() || b->get<std::string>() != "none"))
    fail("\"bias\" " + b->dump() + " is not supported (only \"none\")");
  if (truthy("modules_to_save")) fail("modules_to_save (whole replaced modules) is not supported");
  if (truthy("rank_pattern")) fail("rank_pattern (per-module ranks) is not supported");
  if (truthy("alpha_pattern")) fail("alpha_pattern (per-module scales) is not supported");
  if (truthy("fan_in_fan_out")) fail("fan_in_fan_out is not supported");
  if (const auto* t = get("target_modules")) {
    if (t->is_string()) {
      c.target_regex = t->get<std::string>();
    } else if (t->is_array()) {
      for (const auto& m : *t) {
        if (!m.is_string()) fail("\"target_modules\" must list names, got " + m.dump());
        c.target_modules.push_back(m.get<std::string>());
      }
    } else {
      fail("\"target_modules\" must be a list of names or a string, got " + t->dump());
    }
  }
  return c;
}

}  // namespace ds::qwen35
