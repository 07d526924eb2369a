// RequestBody: the JSON body of each streamed request. Every body asks for the usage chunk
// (stream_options.include_usage), which is where bench_serve takes its token counts from.
// Chat bodies carry max_completion_tokens, completions bodies max_tokens, as vllm bench
// serve sends them; a constrained request (--structured-fraction) gets --structured-body
// merged in, then --extra-body is merged in last, so it can override any field.
#pragma once

#include <optional>
#include <string>

#include "programs/bench_serve/bench_json.h"
#include "programs/bench_serve/bench_options.h"

namespace ds::bench {

// What a constrained request adds when --structured-body is not given: a small record (typed
// properties, an enum, a bounded integer, an array with maxItems, strings with maxLength), so
// that even a random-weight model's reply ends well inside a few hundred tokens. Chat sends
// OpenAI's response_format json_schema; completions vLLM's structured_outputs.json.
Json default_structured_body(bool chat);

class RequestBody {
 public:
  // Throws std::invalid_argument when --extra-body or --structured-body is not a JSON object.
  RequestBody(const BenchOptions& o, std::string model);

  // input: the completions "prompt" or the chat "messages"; structured: the request is one
  // of the constrained ones.
  // model: this request's "model" instead of the body's (a LoRA adapter's name); empty: none.
  std::string make(const Json& input, int max_tokens, bool structured = false, const std::string& model = {}) const;

  bool chat() const { return chat_; }
  const std::string& route() const { return route_; }

 private:
  bool chat_;
  std::string route_;
  Json base_;
  Json structured_;
  Json extra_;
};

}  // namespace ds::bench
