// RequestParser: an incremental HTTP/1.x request parser with hard limits, fed whatever bytes
// a socket gave, so that nothing a client sends can make the server buffer without bound.
//
// * The head (request line + headers) is bounded in bytes and in header count (431 beyond),
//   the target in bytes (414); the parser never rescans bytes it has looked at, so a client
//   trickling a head byte by byte costs linear time.
// * The body is bounded whatever its encoding: a Content-Length over the limit is refused as
//   soon as the head is read, and a chunked body as soon as a chunk would cross the limit
//   (413), before its bytes arrive.
// * Ambiguous framing is refused (400): Content-Length together with Transfer-Encoding,
//   conflicting Content-Lengths, obsolete header folding, bare CR; codings other than
//   `chunked` get 501, versions other than HTTP/1.0 and 1.1 get 505.
// * Bytes after a complete request stay buffered: a pipelined request is parsed by the next
//   parse() without waiting for the socket.
// It does no I/O and allocates only what the limits allow, which is what the fuzz target
// (tests/fuzz) checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http_message.h"

namespace ds::server {

struct HttpLimits {
  size_t max_head_bytes = 64u << 10;    // request line + headers (+ chunked trailers)
  size_t max_header_count = 128;
  size_t max_target_bytes = 16u << 10;  // the request target (URI)
  // Decoded body, any encoding. 32 MiB holds a prompt of a million tokens (about 8 MB of
  // JSON) four times over; serve --max-body-size raises it.
  size_t max_body_bytes = 32u << 20;
};

class RequestParser {
 public:
  enum class Status { need_more, complete, error };

  explicit RequestParser(HttpLimits limits = {});

  // Appends bytes and parses as far as they go.
  Status feed(std::string_view bytes);
  // Parses what is already buffered (e.g. a pipelined request after take()).
  Status parse();

  // The complete request; the parser then starts on the next one, keeping buffered bytes.
  HttpRequest take();

  // After Status::error: the HTTP status to answer (400, 413, 414, 431, 501, 505) and why.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // Whether any byte of the current request has arrived (a connection between requests is
  // idle; one in the middle of a head or body is reading).
  bool in_request() const { return state_ != State::head || head_bytes_ > 0 || pending() > 0; }
  // The head is complete and the body is being read.
  bool reading_body() const { return state_ != State::head && state_ != State::done && state_ != State::error; }
  // While reading_body(): the request so far (method, target, headers; the body as received),
  // so that its owner can refuse it before the body arrives (a missing API key).
  const HttpRequest& head() const { return req_; }
  // While reading_body(): the Content-Length announced (0 for a chunked body) and the body
  // bytes received so far.
  uint64_t announced_length() const { return announced_; }
  size_t body_received() const { return req_.body.size(); }
  // The head is complete and the client waits for "100 Continue" before sending the body.
  bool wants_continue() const { return wants_continue_; }
  void continue_sent() { wants_continue_ = false; }
  // Bytes received but not yet consumed.
  size_t pending() const { return buf_.size() - pos_; }

 private:
  enum class State { head, body_length, chunk_size, chunk_data, chunk_crlf, trailers, done, error };

  Status fail(int status, std::string message);
  // The next line ('\n'-terminated, a trailing '\r' dropped) or false when it has not fully
  // arrived; `budget` bounds its length (the caller's limit decides the status).
  bool next_line(std::string_view& line, size_t budget, bool& too_long);
  Status on_request_line(std::string_view line);
  Status on_header_line(std::string_view line);
  Status on_head_end();
  void compact();
  // Moves up to remaining_ buffered bytes into the body; true when they were all there.
  bool take_body();

  HttpLimits limits_;
  std::string buf_;
  size_t pos_ = 0;   // first unconsumed byte
  size_t scan_ = 0;  // where the search for the next '\n' resumes (>= pos_)
  State state_ = State::head;
  bool seen_request_line_ = false;
  size_t head_bytes_ = 0;  // bytes of the current head (or trailers) consumed so far
  uint64_t remaining_ = 0;  // body bytes still to come (length or current chunk)
  uint64_t announced_ = 0;  // the Content-Length of the body being read
  bool wants_continue_ = false;
  HttpRequest req_;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace ds::server
