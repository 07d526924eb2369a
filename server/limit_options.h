// LimitOptions: serve's flags for what a client may make the server spend -- connections,
// request heads and bodies, time, and structured-output grammar compiles -- with the checks
// that need no model, and their translation into the transport's and the grammar cache's
// options. README.md "Security notes" lists every limit with its flag; the defaults are the
// same values as HttpTransportOptions / HttpLimits (http_transport.h, http_parser.h) and
// GrammarCacheOptions / CompileLimits (grammar_cache.h, model/grammar/budget.h).
#pragma once

#include <cstdint>
#include <string>

#include "server/grammar_cache.h"
#include "server/http_transport.h"

namespace CLI {
class App;
}

namespace ds::server {

struct LimitOptions {
  // HTTP.
  int64_t max_connections = 4096;
  std::string max_body_size = "32MiB";
  std::string max_body_memory = "256MiB";  // all bodies being received or handled, together
  double request_head_timeout = 30;        // seconds
  double request_body_timeout = 120;
  std::string min_body_rate = "16KiB";     // per second; 0: off
  double keep_alive_timeout = 30;
  double write_timeout = 30;
  // Structured-output grammars.
  int grammar_compile_concurrency = 2;
  int grammar_compile_queue = 64;
  double grammar_compile_timeout = 10;
  int64_t grammar_max_states = 500'000;
  std::string grammar_max_memory = "256MiB";  // per compile
  std::string grammar_cache_memory = "256MiB";
};

void add_limit_options(CLI::App& app, LimitOptions& o);
// An empty string when the limits are usable, else what is wrong (one line, naming the flag).
std::string validate_limit_options(const LimitOptions& o);

// What the flags mean for the transport (host, port and threads are set by serve) and for
// the grammar cache. The options must have passed validate_limit_options.
HttpTransportOptions transport_options(const LimitOptions& o);
GrammarCacheOptions grammar_cache_options(const LimitOptions& o);

}  // namespace ds::server
