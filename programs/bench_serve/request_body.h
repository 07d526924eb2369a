// RequestBody: the JSON body of each streamed request. Every body asks for the usage chunk
// (stream_options.include_usage), which is where bench_serve takes its token counts from.
// Chat bodies carry max_completion_tokens, completions bodies max_tokens, as vllm bench
// serve sends them; --extra-body is merged in last, so it can override any field.
#pragma once

#include <optional>
#include <string>

#include "programs/bench_serve/bench_json.h"
#include "programs/bench_serve/bench_options.h"

namespace ds::bench {

class RequestBody {
 public:
  // Throws std::invalid_argument when --extra-body is not a JSON object.
  RequestBody(const BenchOptions& o, std::string model);

  // input: the completions "prompt" or the chat "messages".
  std::string make(const Json& input, int max_tokens) const;

  bool chat() const { return chat_; }
  const std::string& route() const { return route_; }

 private:
  bool chat_;
  std::string route_;
  Json base_;
  Json extra_;
};

}  // namespace ds::bench
