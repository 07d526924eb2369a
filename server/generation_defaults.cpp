#include "server/generation_defaults.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "server/request_params.h"

namespace ds::server {

GenerationDefaults GenerationDefaults::load(const std::filesystem::path& dir) {
  GenerationDefaults d;
  const auto path = dir / "generation_config.json";
  std::ifstream in(path);
  if (!in) return d;
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (!j.is_object()) throw std::runtime_error(path.string() + ": not a JSON object");
  // Checked here by the rule requests are checked by: a default no request could send would
  // otherwise fail every request that omits the field.
  auto num = [&](const char* key) -> std::optional<double> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (!it->is_number()) throw std::runtime_error(path.string() + ": '" + key + "' must be a number");
    const double v = it->get<double>();
    if (std::string e = sampling_range_error(key, v); !e.empty()) throw std::runtime_error(path.string() + ": " + e);
    return v;
  };
  // As vLLM: only these keys count; do_sample is not read (a request asks for greedy with
  // temperature 0).
  if (auto v = num("temperature")) d.temperature = static_cast<float>(*v);
  if (auto v = num("top_p")) d.top_p = static_cast<float>(*v);
  if (auto v = num("top_k")) d.top_k = static_cast<int32_t>(*v);
  if (auto v = num("min_p")) d.min_p = static_cast<float>(*v);
  if (auto v = num("repetition_penalty")) d.repetition_penalty = static_cast<float>(*v);
  return d;
}

std::string GenerationDefaults::describe() const {
  std::string s;
  auto add = [&](const char* k, const std::string& v) {
    if (!s.empty()) s += ", ";
    s += k;
    s += '=';
    s += v;
  };
  auto f = [](float v) {
    std::ostringstream o;
    o << v;
    return o.str();
  };
  if (temperature) add("temperature", f(*temperature));
  if (top_p) add("top_p", f(*top_p));
  if (top_k) add("top_k", std::to_string(*top_k));
  if (min_p) add("min_p", f(*min_p));
  if (repetition_penalty) add("repetition_penalty", f(*repetition_penalty));
  return s.empty() ? "none (OpenAI defaults)" : s;
}

}  // namespace ds::server
