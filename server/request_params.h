// Parsing and validating the generation parameters shared by /v1/chat/completions and
// /v1/completions. Every refusal is an ApiError 400 that names the field; fields we do not
// implement are refused by name (never silently ignored), and fields nobody asked us to
// understand (user, metadata, store, ...) are ignored, as OpenAI's own API does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/json.h"

#include "scheduler/sampling_params.h"
#include "server/generation_defaults.h"

namespace ds::server {

inline constexpr int kMaxChoices = 16;
inline constexpr size_t kMaxStopStrings = 16;

enum class Endpoint { chat, completions };

struct GenerationParams {
  int n = 1;
  std::optional<int64_t> max_tokens;  // none: up to the context limit
  scheduler::SamplingParams sampling;  // seed is the base seed; choice i uses seed + i
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool include_stop = false;   // include_stop_str_in_output
  bool skip_special = true;    // skip_special_tokens
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool continuous_usage = false;  // stream_options.continuous_usage_stats
  bool return_token_ids = false;  // vLLM extension: token ids in non-streaming choices
};

// Reads the shared fields of a request body (an object). vocab bounds token ids in
// logit_bias and stop_token_ids.
GenerationParams parse_generation_params(const Json& body, Endpoint endpoint,
                                         const GenerationDefaults& defaults, int64_t vocab);

// The range rule of a sampling field that generation_config.json may also set ("temperature",
// "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"):
// empty when `value` is allowed, else why not, naming the field. One rule for requests and for
// the model's defaults, which are checked at start-up.
std::string sampling_range_error(const std::string& key, double value);

// A field of an object, or null when it is absent or null.
const Json* get_field(const Json& body, const char* key);
// Typed field access: absent or null -> nullopt; a value of another type -> 400 naming it.
std::optional<bool> get_bool(const Json& body, const char* key);
std::optional<double> get_number(const Json& body, const char* key);
std::optional<int64_t> get_int(const Json& body, const char* key);  // within int64
std::optional<float> get_float(const Json& body, const char* key);  // finite as a float
std::optional<std::string> get_string(const Json& body, const char* key);

}  // namespace ds::server
