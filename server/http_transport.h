// HttpTransport: the server's TCP side of HTTP/1.1, written for a server that must stay up
// whatever its clients do.
//
// * One event-loop thread (epoll) accepts connections and reads requests: a connection that
//   is idle between requests, or trickling a request in, costs a file descriptor and a parser,
//   never a thread. Requests are parsed with hard limits (http_parser.h: 413 as soon as a body
//   of any encoding would cross the limit, 431 for oversized heads).
// * A complete request is handed to a RequestThreadPool thread with its connection; the
//   handler's reply (a body, or a stream written as chunks) is written there, and the
//   connection goes back to the event loop for its next request (keep-alive, pipelining).
// * The owner checks each request's head (the API key) as soon as it is complete, before its
//   body is read: a refused request costs neither the body's memory nor the time to send it.
// * Time bounds per connection: a request's head must arrive within head_timeout of its first
//   byte; its body within body_timeout of the head, at min_body_rate bytes/s on average once
//   body_rate_grace has passed, never stalling for read_idle_timeout (408 for each, as nginx's
//   client_body_timeout); an idle connection is closed after keep_alive_timeout, a reply the
//   client does not read fails after write_timeout.
// * Bodies being received or handled hold at most max_inflight_body_bytes in all (a
//   Content-Length counts in full from the head on, until its request has been answered):
//   beyond that a request is refused with 503 at its head.
// * At most max_connections are open; beyond that the longest-idle connection is closed to
//   make room, else the slowest one still sending its request (after a second, at the lowest
//   rate), and only when there is none of those is the new one answered 503 and closed. So a
//   crowd of trickling connections cannot lock out new clients.
// * The listen backlog is large (SOMAXCONN) and accept runs until the queue is empty, so a
//   burst of connections sees responses (200s, 429s), not resets. TCP_NODELAY is set on every
//   connection: replies go out when written, not after a delayed ACK.
// * close_connections_after_replies() (a drain before stop()) ends every reply with
//   "Connection: close" and closes connections idle between requests, so that a proxy opens a
//   new connection per request from then on: once stop() closes the listener, those fail to
//   connect (which a proxy retries elsewhere) instead of a reused connection dying under a
//   request.
// * stop() closes the listener and every connection not being served at once (idle, half-read,
//   or flushing an error), shuts down those being served, and joins the handler threads.
// Errors found by the transport itself (malformed request, limits, timeouts, overload) are
// rendered by the owner's ErrorRenderer, so they have the API's error shape. Range headers and
// other HTTP features an API server does not need are ignored.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "server/http_message.h"
#include "server/http_parser.h"

namespace ds::server {

struct HttpTransportOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0 = any free port
  HttpLimits limits;
  size_t max_threads = 512;        // requests handled at once; more wait in order
  size_t max_connections = 4096;   // open connections (bounded by the file-descriptor limit too)
  std::chrono::milliseconds head_timeout{30'000};
  std::chrono::milliseconds body_timeout{120'000};
  size_t min_body_rate = 16u << 10;  // bytes/s, averaged from the head's end
  std::chrono::milliseconds body_rate_grace{5'000};
  std::chrono::milliseconds read_idle_timeout{30'000};
  std::chrono::milliseconds keep_alive_timeout{30'000};
  std::chrono::milliseconds write_timeout{30'000};
  size_t max_inflight_body_bytes = 256u << 20;
  HttpHeaders default_headers;  // added to every response
};

class HttpTransport {
 public:
  // Handles one request (on a pool thread); must not throw.
  using Handler = std::function<void(HttpRequest&, HttpResponse&)>;
  // Fills a response for a transport-level error (status 400, 408, 413, 414, 431, 501, 503, 505).
  using ErrorRenderer = std::function<void(int status, const std::string& message, HttpResponse&)>;
  // Sees every response's status once it is written (nullptr request: a transport-level error).
  using Observer = std::function<void(const HttpRequest*, int status)>;
  // Sees a request's head (method, target, headers) before its body is read; returns false,
  // with `refusal` filled, to answer it at once and close the connection. Runs on the event
  // loop: it must be quick and must not throw.
  using HeadCheck = std::function<bool(const HttpRequest& head, HttpResponse& refusal)>;

  HttpTransport(HttpTransportOptions options, Handler handler, ErrorRenderer render_error, Observer observe,
                HeadCheck head_check = {});
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds and listens; returns the port. Throws std::runtime_error naming host:port.
  int bind();
  // Adds a header to every response from now on (before start()).
  void add_default_header(std::string name, std::string value);
  // Runs the event loop on a background thread.
  void start();
  void close_connections_after_replies();
  void stop();

  int port() const;
  size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::server
