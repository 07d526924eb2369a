#include "server/request_params.h"

#include <cmath>
#include <limits>

#include "server/api_error.h"

namespace ds::server {

const Json* get_field(const Json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

namespace {

const Json* field(const Json& body, const char* key) { return get_field(body, key); }

int32_t token_id(const Json& v, int64_t vocab, const std::string& param) {
  if (!v.is_number_integer()) throw bad_request("'" + param + "' must hold integer token ids", param);
  const int64_t t = v.get<int64_t>();
  if (t < 0 || t >= vocab)
    throw bad_request("'" + param + "': token id " + std::to_string(t) + " is outside the vocabulary of " +
                          std::to_string(vocab),
                      param);
  return static_cast<int32_t>(t);
}

}  // namespace

std::optional<bool> get_bool(const Json& body, const char* key) {
  const auto* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw bad_request(std::string("'") + key + "' must be a boolean", key);
  return v->get<bool>();
}

std::optional<double> get_number(const Json& body, const char* key) {
  const auto* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw bad_request(std::string("'") + key + "' must be a number", key);
  const double d = v->get<double>();
  if (!std::isfinite(d)) throw bad_request(std::string("'") + key + "' must be finite", key);
  return d;
}

std::optional<int64_t> get_int(const Json& body, const char* key) {
  const auto* v = field(body, key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    if (v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw bad_request(std::string("'") + key + "' is out of range", key);
    return static_cast<int64_t>(v->get<uint64_t>());
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  // 2.0 is an integer to a JavaScript client.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d)) {
      if (std::fabs(d) >= 9.0e15) throw bad_request(std::string("'") + key + "' is out of range", key);
      return static_cast<int64_t>(d);
    }
  }
  throw bad_request(std::string("'") + key + "' must be an integer", key);
}

std::optional<float> get_float(const Json& body, const char* key) {
  const auto d = get_number(body, key);
  if (!d) return std::nullopt;
  if (std::fabs(*d) > std::numeric_limits<float>::max())
    throw bad_request(std::string("'") + key + "' is out of range", key);
  return static_cast<float>(*d);
}

std::string sampling_range_error(const std::string& key, double v) {
  const std::string f = "'" + key + "' ";
  if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max()) return f + "must be a finite number";
  if (key == "temperature" && !(v >= 0)) return f + "must be >= 0";
  if (key == "top_p" && !(v > 0 && v <= 1)) return f + "must be in (0, 1]";
  if (key == "top_k" && !(v == std::floor(v) && v >= -1 && v <= std::numeric_limits<int32_t>::max()))
    return f + "must be -1 or 0 (off) or a positive integer";
  if (key == "min_p" && !(v >= 0 && v <= 1)) return f + "must be in [0, 1]";
  if (key == "repetition_penalty" && !(v > 0)) return f + "must be > 0";
  if ((key == "presence_penalty" || key == "frequency_penalty") && !(v >= -2 && v <= 2)) return f + "must be in [-2, 2]";
  return {};
}

std::optional<std::string> get_string(const Json& body, const char* key) {
  const auto* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw bad_request(std::string("'") + key + "' must be a string", key);
  return v->get<std::string>();
}

GenerationParams parse_generation_params(const Json& body, Endpoint endpoint,
                                         const GenerationDefaults& defaults, int64_t vocab) {
  GenerationParams p;
  const bool chat = endpoint == Endpoint::chat;

  // Refused by name: we cannot honour them, and ignoring them would hand back something
  // other than what was asked for.
  if (get_bool(body, "use_beam_search").value_or(false))
    throw unsupported_field("use_beam_search", "beam search is not supported");
  if (get_int(body, "min_tokens").value_or(0) != 0)
    throw unsupported_field("min_tokens", "the engine has no minimum-length constraint");
  if (field(body, "prompt_logprobs")) throw unsupported_field("prompt_logprobs");
  // Structured outputs (response_format, structured_outputs, guided_*) are read by
  // structured_output.h; these spellings belong to other servers' APIs.
  for (const char* k : {"grammar", "json_schema", "regex", "ebnf"})
    if (field(body, k))
      throw unsupported_field(k, "use 'response_format', 'structured_outputs' or the 'guided_*' fields");
  if (auto best_of = get_int(body, "best_of"); best_of && *best_of != 1)
    throw unsupported_field("best_of", "only best_of = 1 is supported; use n for several choices");

  if (auto n = get_int(body, "n")) {
    if (*n < 1 || *n > kMaxChoices)
      throw bad_request("'n' must be between 1 and " + std::to_string(kMaxChoices), "n");
    p.n = static_cast<int>(*n);
  }

  // max_completion_tokens is the newer name; it wins when both are sent.
  for (const char* k : {"max_tokens", "max_completion_tokens"}) {
    if (auto m = get_int(body, k)) {
      if (*m < 1) throw bad_request(std::string("'") + k + "' must be at least 1", k);
      p.max_tokens = *m;
    }
  }

  auto& s = p.sampling;
  // A request's value, else the model's default, else OpenAI's; checked by the one range rule.
  auto number = [&](const char* key, std::optional<float> fallback, float openai_default) {
    const float v = get_float(body, key).value_or(fallback.value_or(openai_default));
    if (std::string e = sampling_range_error(key, v); !e.empty()) throw bad_request(e, key);
    return v;
  };
  s.temperature = number("temperature", defaults.temperature, 1.0f);
  s.top_p = number("top_p", defaults.top_p, 1.0f);
  const int64_t top_k = get_int(body, "top_k").value_or(defaults.top_k.value_or(0));
  if (std::string e = sampling_range_error("top_k", static_cast<double>(top_k)); !e.empty()) throw bad_request(e, "top_k");
  s.top_k = top_k < 0 ? 0 : static_cast<int32_t>(top_k);
  s.min_p = number("min_p", defaults.min_p, 0.0f);
  s.repetition_penalty = number("repetition_penalty", defaults.repetition_penalty, 1.0f);
  s.presence_penalty = number("presence_penalty", std::nullopt, 0.0f);
  s.frequency_penalty = number("frequency_penalty", std::nullopt, 0.0f);
  if (auto seed = get_int(body, "seed")) s.seed = static_cast<uint64_t>(*seed);

  if (const auto* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) throw bad_request("'logit_bias' must be an object of token id -> bias", "logit_bias");
    for (const auto& [k, v] : lb->items()) {
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(k, &used);
      } catch (...) {
        used = 0;
      }
      if (used != k.size() || id < 0 || id >= vocab)
        throw bad_request("'logit_bias' key '" + k + "' is not a token id of this model (0.." +
                              std::to_string(vocab - 1) + ")",
                          "logit_bias");
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < -100 || v.get<double>() > 100)
        throw bad_request("'logit_bias' values must be numbers in [-100, 100]", "logit_bias");
      s.logit_bias.push_back({static_cast<int32_t>(id), v.get<float>()});
    }
  }

  // logprobs: a boolean plus top_logprobs for chat; an integer (the number of alternatives)
  // for completions.
  if (chat) {
    const bool lp = get_bool(body, "logprobs").value_or(false);
    const int64_t top = get_int(body, "top_logprobs").value_or(0);
    if (top < 0 || top > kernels::kMaxTopLogprobs)
      throw bad_request("'top_logprobs' must be between 0 and " + std::to_string(kernels::kMaxTopLogprobs),
                        "top_logprobs");
    if (top > 0 && !lp) throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    s.logprobs = lp;
    s.top_logprobs = static_cast<int32_t>(top);
  } else if (const auto* lp = field(body, "logprobs")) {
    if (lp->is_boolean()) {
      s.logprobs = lp->get<bool>();
    } else {
      const int64_t top = get_int(body, "logprobs").value_or(0);
      if (top < 0 || top > kernels::kMaxTopLogprobs)
        throw bad_request("'logprobs' must be between 0 and " + std::to_string(kernels::kMaxTopLogprobs),
                          "logprobs");
      s.logprobs = true;
      s.top_logprobs = static_cast<int32_t>(top);
    }
  }

  if (const auto* st = field(body, "stop")) {
    if (st->is_string()) {
      p.stop.push_back(st->get<std::string>());
    } else if (st->is_array()) {
      for (const auto& v : *st) {
        if (!v.is_string()) throw bad_request("'stop' must be a string or a list of strings", "stop");
        p.stop.push_back(v.get<std::string>());
      }
    } else {
      throw bad_request("'stop' must be a string or a list of strings", "stop");
    }
    if (p.stop.size() > kMaxStopStrings)
      throw bad_request("'stop' holds at most " + std::to_string(kMaxStopStrings) + " strings", "stop");
    for (const auto& x : p.stop)
      if (x.empty()) throw bad_request("'stop' strings must not be empty", "stop");
  }
  if (const auto* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) throw bad_request("'stop_token_ids' must be a list of token ids", "stop_token_ids");
    for (const auto& v : *ids) p.stop_token_ids.push_back(token_id(v, vocab, "stop_token_ids"));
  }
  p.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  p.include_stop = get_bool(body, "include_stop_str_in_output").value_or(false);
  p.skip_special = get_bool(body, "skip_special_tokens").value_or(true);

  p.return_token_ids = get_bool(body, "return_token_ids").value_or(false);
  p.stream = get_bool(body, "stream").value_or(false);
  if (const auto* so = field(body, "stream_options")) {
    if (!p.stream) throw bad_request("'stream_options' is only allowed with 'stream': true", "stream_options");
    if (!so->is_object()) throw bad_request("'stream_options' must be an object", "stream_options");
    p.include_usage = get_bool(*so, "include_usage").value_or(false);
    p.continuous_usage = get_bool(*so, "continuous_usage_stats").value_or(false);
  }
  return p;
}

}  // namespace ds::server
