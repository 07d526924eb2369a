// StreamReader: reads the events of one streamed OpenAI completion (/v1/completions or
// /v1/chat/completions) into a RequestResult: timings, usage, the reply text, and the first
// error, whether it came as an HTTP status, an error event inside the stream, a malformed
// event, a stream cut before "data: [DONE]", or a missing usage chunk.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "programs/bench_serve/request_result.h"

namespace ds::bench {

class StreamReader {
 public:
  using Clock = std::chrono::steady_clock;

  StreamReader(bool chat, Clock::time_point sent) : chat_(chat), sent_(sent) {}

  // One event's data ("{...}" or "[DONE]") received at `t`.
  void on_event(std::string_view data, Clock::time_point t);

  // The exchange is over at `end`. status: the HTTP status (0 when no response came);
  // error_body: the body of a non-200 response; transport_error: what broke the connection
  // (empty when it completed).
  RequestResult finish(Clock::time_point end, int status, const std::string& error_body,
                       const std::string& transport_error);

 private:
  void fail(std::string error);

  bool chat_;
  Clock::time_point sent_;
  RequestResult r_;
  bool got_output_ = false;
  bool got_finish_ = false;
  Clock::time_point last_output_{};
  Clock::time_point finish_time_{};
  bool done_ = false;  // "[DONE]" seen
  bool got_usage_ = false;
};

// The message of an OpenAI error body ({"error": {"message": ...}}), else the body itself,
// cut to a few hundred bytes.
std::string error_message(std::string_view body);

}  // namespace ds::bench
