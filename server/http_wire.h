// The response side of HTTP/1.x on the wire: the status line and headers, and the framing of
// a chunked (streamed) body.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "server/http_message.h"

namespace ds::server {

std::string_view http_reason(int status);

// Status line and headers of `res`, ending with the blank line. `chunked`: the body follows in
// chunks; otherwise a Content-Length of `body_bytes` (none for 1xx/204/304).
std::string http_response_head(const HttpResponse& res, const HttpHeaders& default_headers, int version_minor,
                               bool keep_alive, bool chunked, size_t body_bytes);

// One chunk of a chunked body (empty data gives nothing: an empty chunk would end the body).
std::string http_chunk(std::string_view data);
inline constexpr std::string_view kHttpLastChunk = "0\r\n\r\n";

}  // namespace ds::server
