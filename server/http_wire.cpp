#include "server/http_wire.h"

#include <cstdio>

namespace ds::server {

std::string_view http_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

std::string http_response_head(const HttpResponse& res, const HttpHeaders& default_headers, int version_minor,
                               bool keep_alive, bool chunked, size_t body_bytes) {
  std::string h = "HTTP/1." + std::to_string(version_minor) + " " + std::to_string(res.status) + " " +
                  std::string(http_reason(res.status)) + "\r\n";
  auto add = [&](std::string_view name, std::string_view value) {
    h.append(name).append(": ").append(value).append("\r\n");
  };
  const bool no_body = res.status < 200 || res.status == 204 || res.status == 304;
  if (!no_body && !res.content_type.empty()) add("Content-Type", res.content_type);
  if (chunked)
    add("Transfer-Encoding", "chunked");
  else if (!no_body)
    add("Content-Length", std::to_string(body_bytes));
  if (!keep_alive)
    add("Connection", "close");
  else if (version_minor == 0)
    add("Connection", "keep-alive");
  for (const auto& [k, v] : default_headers) add(k, v);
  for (const auto& [k, v] : res.headers) add(k, v);
  h.append("\r\n");
  return h;
}

std::string http_chunk(std::string_view data) {
  if (data.empty()) return {};
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out;
  out.reserve(static_cast<size_t>(n) + data.size() + 2);
  out.append(size, static_cast<size_t>(n)).append(data).append("\r\n");
  return out;
}

}  // namespace ds::server
