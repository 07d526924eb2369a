// HttpServer: the OpenAI- and Anthropic-compatible HTTP front end over one ServedModel, on our
// own HTTP/1.1 transport (http_transport.h: bounded heads, bodies, connections and time per
// connection).
//
// Routes: POST /v1/chat/completions, POST /v1/completions, POST /v1/responses (OpenAI
// Responses), POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages),
// GET /v1/models[/{id}], GET /health, GET /metrics, POST /tokenize, POST /detokenize (also
// under /v1/). Errors are OpenAI error objects (api_error.h), Anthropic's on /v1/messages*,
// including the transport's own (400 malformed, 408 slow, 413 body too large, 431 head too
// large, 503 too many connections; always OpenAI's), 404 for an unknown route and 405 for a
// known one with another method. With an API key every route except /health, /metrics and
// CORS preflights needs "Authorization: Bearer <key>" or "x-api-key: <key>", compared in
// constant time, before anything else is looked at: on the request's head, before its body is
// read (HttpTransport::HeadCheck), and again by the handler.
//
// Life cycle: bind() (port 0 picks a free one) and start() listen at once, answering 503
// ("model is loading") and /health 503 until set_model(); begin_shutdown() stops admitting
// generation requests (503), turns /health to 503 and closes each connection after its reply
// (HttpTransport::close_connections_after_replies) while in-flight requests finish;
// cancel_all() cancels those; stop() closes the listener and joins every connection thread.
// A client that disconnects while its request generates has it cancelled at once
// (disconnect_watcher.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "server/http_transport.h"
#include "server/metrics.h"
#include "server/served_model.h"

namespace ds::server {

struct HttpServerOptions {
  std::string api_key;       // empty = no authentication
  std::string served_name;   // for /metrics before the model is ready
  HttpTransportOptions transport;  // where to listen; limits, threads, connections, timeouts
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, ServerMetrics& metrics);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port. Throws std::runtime_error naming host:port.
  int bind();
  // Names this replica in the x-deltaserve-instance header of every reply (before start()).
  void set_instance_id(const std::string& id);
  // Serves on a background thread.
  void start();
  // The model is ready (must outlive the server or a later set_model(nullptr)).
  void set_model(const ServedModel* model);
  void begin_shutdown();
  void cancel_all();
  // Generation requests being served.
  size_t active_requests() const;
  void stop();

  int port() const;
  const HttpServerOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::server
