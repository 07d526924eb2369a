// RequestResult: what one request measured, in the terms of vllm bench serve.
//
// ttft: from sending the request to the first chunk that carries generated output (text,
// content, reasoning or tool calls; a chunk holding only the assistant role, which some
// servers send before any token, is not one), or to the finish chunk when no chunk carries
// any. itl: the gaps between successive output-carrying chunks. latency: to the end of the
// stream. Token counts are the server's usage chunk (stream_options.include_usage).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::bench {

struct RequestResult {
  bool success = false;
  std::string error;  // the first thing that went wrong, when !success
  double start = 0;   // seconds after the benchmark started
  double ttft = 0;    // seconds
  double latency = 0;
  std::vector<double> itl;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::string finish_reason;  // of the first choice to finish ("stop", "length", ...)
  std::string content;  // the reply text (a conversation sends it back in its next turn)
  int turn = 0;         // index of the turn in its session (0 for one-request sessions)
  bool structured = false;  // sent with --structured-body
};

}  // namespace ds::bench
