// HttpRequest and HttpResponse: what the HTTP transport (http_transport.h) hands a handler and
// what the handler hands back. Plain data; the wire format lives in http_parser.h (requests)
// and http_wire.h (responses).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ds::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// ASCII case-insensitive equality, as HTTP compares header names and tokens.
bool http_iequals(std::string_view a, std::string_view b);

struct HttpRequest {
  std::string method;   // as sent ("GET", "POST", ...)
  std::string target;   // the request target as sent
  std::string path;     // target without the query string
  std::string query;    // after '?', or empty
  int version_minor = 1;  // HTTP/1.<minor>
  HttpHeaders headers;    // in the order sent
  std::string body;       // the decoded body (Content-Length or chunked)
  bool keep_alive = true;  // what the client asked for (Connection header and version)

  std::string remote_addr;
  int remote_port = 0;
  // The connection's socket, for watching it while the request runs (disconnect_watcher.h);
  // the transport owns it and closes it only after the response is written.
  int socket = -1;

  // The first header of that name (case-insensitive), or empty.
  std::string_view header(std::string_view name) const;
  bool has_header(std::string_view name) const;
};

// A writer for a streamed body: false once the client is gone (the handler should stop).
using BodyWriter = std::function<bool(std::string_view)>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HttpHeaders headers;  // extra headers (Retry-After, Cache-Control, ...)
  std::string body;
  // A streamed reply: when set, the transport writes the head, then calls this with a writer
  // (chunked transfer encoding on HTTP/1.1); `body` is ignored. Whatever the closure holds is
  // released when the response is destroyed, after the last write.
  std::function<void(const BodyWriter&)> stream;

  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
};

}  // namespace ds::server
