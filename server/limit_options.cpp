// LimitOptions (limit_options.h).
#include "server/limit_options.h"

#include <cmath>

#include <CLI/CLI.hpp>

#include "server/server_options.h"

namespace ds::server {

namespace {

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

}  // namespace

void add_limit_options(CLI::App& app, LimitOptions& o) {
  const std::string http = "HTTP limits";
  app.add_option("--max-connections", o.max_connections,
                 "Open connections at most; beyond it an idle or the slowest-sending one is closed, else the new one "
                 "gets 503")
      ->capture_default_str()->group(http);
  app.add_option("--max-body-size", o.max_body_size,
                 "Largest request body (any encoding), e.g. 64MiB; larger ones get 413 before they are read")
      ->capture_default_str()->group(http);
  app.add_option("--max-body-memory", o.max_body_memory,
                 "Bytes all request bodies being received or handled may hold together (a Content-Length counts in "
                 "full); beyond it a request gets 503 at its head")
      ->capture_default_str()->group(http);
  app.add_option("--request-head-timeout", o.request_head_timeout,
                 "Seconds a request's head (request line and headers) may take to arrive (408)")
      ->capture_default_str()->group(http);
  app.add_option("--request-body-timeout", o.request_body_timeout,
                 "Seconds a request's body may take to arrive after its head (408)")
      ->capture_default_str()->group(http);
  app.add_option("--min-body-rate", o.min_body_rate,
                 "Bytes per second a body must arrive at on average after its first 5 seconds (408); 0: no minimum")
      ->capture_default_str()->group(http);
  app.add_option("--keep-alive-timeout", o.keep_alive_timeout, "Seconds an idle connection is kept open")
      ->capture_default_str()->group(http);
  app.add_option("--write-timeout", o.write_timeout, "Seconds a client may leave a reply unread before it fails")
      ->capture_default_str()->group(http);

  const std::string grammar = "Structured-output limits";
  app.add_option("--grammar-compile-concurrency", o.grammar_compile_concurrency,
                 "Structured-output grammars (JSON schemas, regexes, grammars, forced tool calls) compiled at once")
      ->capture_default_str()->group(grammar);
  app.add_option("--grammar-compile-queue", o.grammar_compile_queue,
                 "Grammar compiles that may wait for a compile slot; beyond it a request gets 503")
      ->capture_default_str()->group(grammar);
  app.add_option("--grammar-compile-timeout", o.grammar_compile_timeout,
                 "Seconds one grammar compile may run; a longer one is refused with 400")
      ->capture_default_str()->group(grammar);
  app.add_option("--grammar-max-states", o.grammar_max_states,
                 "Automaton states one grammar may need; a larger one is refused with 400")
      ->capture_default_str()->group(grammar);
  app.add_option("--grammar-max-memory", o.grammar_max_memory,
                 "Memory one grammar compile may hold, e.g. 512MiB; a compile needing more is refused with 400")
      ->capture_default_str()->group(grammar);
  app.add_option("--grammar-cache-memory", o.grammar_cache_memory,
                 "Memory the compiled grammars kept for reuse may hold")
      ->capture_default_str()->group(grammar);
}

std::string validate_limit_options(const LimitOptions& o) {
  auto bytes = [](const std::string& flag, const std::string& text, int64_t& out) -> std::string {
    try {
      out = parse_bytes(text);
    } catch (const std::exception& e) {
      return flag + ": " + e.what();
    }
    return {};
  };
  int64_t body = 0, body_memory = 0, rate = 0, grammar_memory = 0, cache_memory = 0;
  if (o.min_body_rate != "0") {
    if (std::string e = bytes("--min-body-rate", o.min_body_rate, rate); !e.empty()) return e;
  }
  for (auto [flag, text, out] : {std::tuple{"--max-body-size", &o.max_body_size, &body},
                                 std::tuple{"--max-body-memory", &o.max_body_memory, &body_memory},
                                 std::tuple{"--grammar-max-memory", &o.grammar_max_memory, &grammar_memory},
                                 std::tuple{"--grammar-cache-memory", &o.grammar_cache_memory, &cache_memory}})
    if (std::string e = bytes(flag, *text, *out); !e.empty()) return e;
  if (body_memory < body) return "--max-body-memory must be at least --max-body-size";
  if (o.max_connections < 1 || o.max_connections > 1'000'000) return "--max-connections must be in 1..1000000";
  for (auto [flag, v] : {std::pair{"--request-head-timeout", o.request_head_timeout},
                         std::pair{"--request-body-timeout", o.request_body_timeout},
                         std::pair{"--keep-alive-timeout", o.keep_alive_timeout},
                         std::pair{"--write-timeout", o.write_timeout},
                         std::pair{"--grammar-compile-timeout", o.grammar_compile_timeout}})
    if (!(v > 0 && v <= 86400)) return std::string(flag) + " must be in (0, 86400] seconds";
  if (o.grammar_compile_concurrency < 1 || o.grammar_compile_concurrency > 256)
    return "--grammar-compile-concurrency must be in 1..256";
  if (o.grammar_compile_queue < 0) return "--grammar-compile-queue must be >= 0";
  if (o.grammar_max_states < 1000) return "--grammar-max-states must be at least 1000";
  return {};
}

HttpTransportOptions transport_options(const LimitOptions& o) {
  HttpTransportOptions t;
  t.max_connections = static_cast<size_t>(o.max_connections);
  t.limits.max_body_bytes = static_cast<size_t>(parse_bytes(o.max_body_size));
  t.max_inflight_body_bytes = static_cast<size_t>(parse_bytes(o.max_body_memory));
  t.head_timeout = millis(o.request_head_timeout);
  t.body_timeout = millis(o.request_body_timeout);
  t.min_body_rate = o.min_body_rate == "0" ? 0 : static_cast<size_t>(parse_bytes(o.min_body_rate));
  t.keep_alive_timeout = millis(o.keep_alive_timeout);
  t.write_timeout = millis(o.write_timeout);
  return t;
}

GrammarCacheOptions grammar_cache_options(const LimitOptions& o) {
  GrammarCacheOptions g;
  g.concurrency = o.grammar_compile_concurrency;
  g.max_waiting = o.grammar_compile_queue;
  g.max_cache_bytes = parse_bytes(o.grammar_cache_memory);
  g.limits.max_time = millis(o.grammar_compile_timeout);
  g.limits.max_states = o.grammar_max_states;
  g.limits.max_bytes = parse_bytes(o.grammar_max_memory);
  return g;
}

}  // namespace ds::server
