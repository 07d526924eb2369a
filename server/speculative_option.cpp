#include "server/speculative_option.h"

#include <stdexcept>

#include "server/json.h"

namespace ds::server {
namespace {

[[noreturn]] void bad(const std::string& m) { throw std::invalid_argument("--speculative-config: " + m); }

int32_t int_field(const Json& v, const std::string& key) {
  if (!v.is_number_integer()) bad(key + " must be an integer");
  const auto x = v.get<int64_t>();
  if (x < 0 || x > (int64_t{1} << 30)) bad(key + " is out of range");
  return static_cast<int32_t>(x);
}

}  // namespace

scheduler::SpeculativeConfig parse_speculative_config(const std::string& text) {
  const Json j = parse_json(text);
  if (j.is_discarded() || !j.is_object()) bad("expected a JSON object, e.g. '{\"method\": \"ngram\", \"num_speculative_tokens\": 3}'");
  scheduler::SpeculativeConfig c;
  bool has_k = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "method") {
      if (!v.is_string()) bad("method must be a string");
      c.method = v.get<std::string>();
    } else if (key == "num_speculative_tokens") {
      c.num_speculative_tokens = int_field(v, key);
      has_k = true;
    } else if (key == "prompt_lookup_min") {
      c.prompt_lookup_min = int_field(v, key);
    } else if (key == "prompt_lookup_max") {
      c.prompt_lookup_max = int_field(v, key);
      if (!j.contains("prompt_lookup_min")) c.prompt_lookup_min = std::min(c.prompt_lookup_min, c.prompt_lookup_max);
    } else if (key == "disable_by_batch_size") {
      c.disable_by_batch_size = int_field(v, key);
    } else if (key == "draft_vocab_size") {
      c.draft_vocab_size = int_field(v, key);
    } else {
      bad("unknown key \"" + key + "\"");
    }
  }
  if (c.method.empty()) bad("method is required (\"ngram\" or \"mtp\")");
  if (!has_k) bad("num_speculative_tokens is required");
  if (std::string e = c.validate(); !e.empty()) bad(e);
  return c;
}

}  // namespace ds::server
