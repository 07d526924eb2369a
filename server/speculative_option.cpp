#include "server/speculative_option.h"

#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

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

// A token map: a JSON array of distinct token ids (what bench/tools/make_draft_token_map.py
// writes). Bounded: a real one lists at most a vocabulary's ids (Qwen3.5: 248,320).
std::vector<int32_t> read_token_map(const std::string& path) {
  constexpr std::streamoff kMaxBytes = 16 << 20;
  constexpr size_t kMaxIds = size_t{1} << 20;
  const std::string who = "draft_token_map " + path + ": ";
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) bad(who + "cannot be read");
  if (f.tellg() > kMaxBytes) bad(who + "is larger than 16 MiB");
  f.seekg(0);
  std::stringstream text;
  text << f.rdbuf();
  const Json j = parse_json(text.str());
  if (j.is_discarded() || !j.is_array() || j.empty()) bad(who + "expected a non-empty JSON array of token ids");
  if (j.size() > kMaxIds) bad(who + "lists more than " + std::to_string(kMaxIds) + " ids");
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  std::unordered_set<int32_t> seen;
  for (const Json& v : j) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      bad(who + "entry " + std::to_string(ids.size()) + " is not a token id");
    const auto id = static_cast<int32_t>(v.get<int64_t>());
    if (!seen.insert(id).second) bad(who + "token id " + std::to_string(id) + " is listed twice");
    ids.push_back(id);
  }
  return ids;
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
    } else if (key == "draft_token_map") {
      if (!v.is_string() || v.get<std::string>().empty()) bad("draft_token_map must be a file name");
      c.draft_tokens = read_token_map(v.get<std::string>());
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
