#include "server/http_parser.h"

#include <algorithm>
#include <cstring>

namespace ds::server {

namespace {

bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls fn(token) for each comma-separated element of a header value, trimmed, empty ones skipped.
template <class Fn>
void for_each_element(std::string_view v, Fn&& fn) {
  while (!v.empty()) {
    const size_t comma = v.find(',');
    const std::string_view e = trim_ows(v.substr(0, comma));
    if (!e.empty()) fn(e);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr size_t kMaxChunkLine = 4096;  // a chunk-size line with its extensions
constexpr uint64_t kInitialBodyReserve = 64u << 10;

}  // namespace

bool http_iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (http_iequals(k, name)) return v;
  return {};
}

bool HttpRequest::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return http_iequals(h.first, name); });
}

RequestParser::RequestParser(HttpLimits limits) : limits_(limits) {}

RequestParser::Status RequestParser::fail(int status, std::string message) {
  state_ = State::error;
  error_status_ = status;
  error_message_ = std::move(message);
  return Status::error;
}

RequestParser::Status RequestParser::feed(std::string_view bytes) {
  if (state_ == State::error) return Status::error;
  compact();
  buf_.append(bytes);
  return parse();
}

void RequestParser::compact() {
  // Drop consumed bytes once they dominate the buffer, so a long-lived connection's buffer
  // stays as large as one request's pending part, at amortised linear cost.
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {
    buf_.erase(0, pos_);
    scan_ -= pos_;
    pos_ = 0;
  }
}

bool RequestParser::next_line(std::string_view& line, size_t budget, bool& too_long) {
  too_long = false;
  const size_t nl = buf_.find('\n', scan_);
  if (nl == std::string::npos) {
    scan_ = buf_.size();
    too_long = scan_ - pos_ > budget;
    return false;
  }
  size_t len = nl - pos_;
  if (len + 1 > budget) {
    too_long = true;
    return false;
  }
  line = std::string_view(buf_).substr(pos_, len);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  pos_ = nl + 1;
  scan_ = pos_;
  return true;
}

RequestParser::Status RequestParser::parse() {
  for (;;) {
    switch (state_) {
      case State::error:
        return Status::error;
      case State::done:
        return Status::complete;
      case State::head:
      case State::trailers: {
        const size_t budget = limits_.max_head_bytes - std::min(limits_.max_head_bytes, head_bytes_);
        std::string_view line;
        bool too_long = false;
        const size_t before = pos_;
        if (!next_line(line, budget, too_long)) {
          if (!too_long) return Status::need_more;
          if (state_ == State::head && !seen_request_line_)
            return fail(414, "the request target exceeds " + std::to_string(limits_.max_target_bytes) + " bytes");
          return fail(431, "the request head exceeds " + std::to_string(limits_.max_head_bytes) + " bytes");
        }
        head_bytes_ += pos_ - before;
        if (line.find('\r') != std::string_view::npos || line.find('\0') != std::string_view::npos)
          return fail(400, "malformed HTTP request: a bare CR or NUL in the head");
        Status s = Status::need_more;
        if (state_ == State::trailers) {
          if (line.empty()) {
            state_ = State::done;
            wants_continue_ = false;
            return Status::complete;
          }
          continue;  // trailer fields are read and dropped
        }
        if (!seen_request_line_) {
          if (line.empty()) continue;  // stray CRLF between pipelined requests
          s = on_request_line(line);
        } else if (line.empty()) {
          s = on_head_end();
        } else {
          s = on_header_line(line);
        }
        if (s != Status::need_more) return s;
        break;
      }
      case State::body_length: {
        if (!take_body()) return Status::need_more;
        state_ = State::done;
        wants_continue_ = false;
        return Status::complete;
      }
      case State::chunk_size: {
        std::string_view line;
        bool too_long = false;
        if (!next_line(line, kMaxChunkLine, too_long)) {
          if (too_long) return fail(400, "malformed chunked body: a chunk-size line is too long");
          return Status::need_more;
        }
        uint64_t size = 0;
        size_t i = 0;
        for (; i < line.size() && hex_digit(line[i]) >= 0; ++i) {
          if (i >= 15) return fail(413, "the request body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes");
          size = size * 16 + static_cast<uint64_t>(hex_digit(line[i]));
        }
        const std::string_view rest = trim_ows(line.substr(i));
        if (i == 0 || (!rest.empty() && rest.front() != ';'))
          return fail(400, "malformed chunked body: bad chunk size");
        if (size > limits_.max_body_bytes - std::min(limits_.max_body_bytes, req_.body.size()))
          return fail(413, "the request body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes");
        if (size == 0) {
          state_ = State::trailers;
          head_bytes_ = 0;
        } else {
          remaining_ = size;
          state_ = State::chunk_data;
        }
        break;
      }
      case State::chunk_data: {
        if (!take_body()) return Status::need_more;
        state_ = State::chunk_crlf;
        break;
      }
      case State::chunk_crlf: {
        std::string_view line;
        bool too_long = false;
        if (!next_line(line, 2, too_long)) {
          if (too_long) return fail(400, "malformed chunked body: no CRLF after a chunk");
          return Status::need_more;
        }
        if (!line.empty()) return fail(400, "malformed chunked body: no CRLF after a chunk");
        state_ = State::chunk_size;
        break;
      }
    }
  }
}

bool RequestParser::take_body() {
  const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, pending()));
  req_.body.append(buf_, pos_, take);
  pos_ += take;
  scan_ = pos_;
  remaining_ -= take;
  return remaining_ == 0;
}

RequestParser::Status RequestParser::on_request_line(std::string_view line) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, "malformed HTTP request line");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "malformed HTTP request line: bad method");
  if (target.size() > limits_.max_target_bytes)
    return fail(414, "the request target exceeds " + std::to_string(limits_.max_target_bytes) + " bytes");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9')
    return fail(400, "malformed HTTP request line: bad version");
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1'))
    return fail(505, "only HTTP/1.0 and HTTP/1.1 are supported");
  std::string_view path = target;
  if (path.rfind("http://", 0) == 0 || path.rfind("https://", 0) == 0) {  // absolute-form
    const size_t slash = path.find('/', path.find("//") + 2);
    path = slash == std::string_view::npos ? std::string_view("/") : path.substr(slash);
  } else if (path != "*" && (path.empty() || path.front() != '/')) {
    return fail(400, "malformed HTTP request line: bad target");
  }
  if (target.find_first_of(std::string_view("\0 \t", 3)) != std::string_view::npos)
    return fail(400, "malformed HTTP request line: bad target");
  req_.method = std::string(method);
  req_.target = std::string(target);
  const size_t q = path.find('?');
  req_.path = std::string(path.substr(0, q));
  req_.query = q == std::string_view::npos ? std::string() : std::string(path.substr(q + 1));
  req_.version_minor = version[7] - '0';
  seen_request_line_ = true;
  return Status::need_more;
}

RequestParser::Status RequestParser::on_header_line(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t')
    return fail(400, "malformed HTTP header: obsolete line folding is not accepted");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
    return fail(400, "malformed HTTP header line");
  if (req_.headers.size() >= limits_.max_header_count)
    return fail(431, "the request has more than " + std::to_string(limits_.max_header_count) + " headers");
  req_.headers.emplace_back(std::string(line.substr(0, colon)), std::string(trim_ows(line.substr(colon + 1))));
  return Status::need_more;
}

RequestParser::Status RequestParser::on_head_end() {
  bool close = false, keep = false, chunked = false, has_te = false, has_length = false, expect = false;
  uint64_t length = 0;
  for (const auto& [name, value] : req_.headers) {
    if (http_iequals(name, "Connection")) {
      for_each_element(value, [&](std::string_view t) {
        close |= http_iequals(t, "close");
        keep |= http_iequals(t, "keep-alive");
      });
    } else if (http_iequals(name, "Transfer-Encoding")) {
      has_te = true;
      bool bad = false;
      for_each_element(value, [&](std::string_view t) {
        if (chunked || !http_iequals(t, "chunked")) bad = true;  // only one `chunked`, nothing else
        chunked = true;
      });
      if (bad || !chunked) return fail(501, "Transfer-Encoding other than 'chunked' is not supported");
    } else if (http_iequals(name, "Content-Length")) {
      Status s = Status::need_more;
      for_each_element(value, [&](std::string_view t) {
        uint64_t v = 0;
        if (t.size() > 19 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          s = t.size() > 19 && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })
                  ? fail(413, "the request body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes")
                  : fail(400, "malformed Content-Length");
          return;
        }
        for (char c : t) v = v * 10 + static_cast<uint64_t>(c - '0');
        if (has_length && v != length) s = fail(400, "conflicting Content-Length headers");
        has_length = true;
        length = v;
      });
      if (s == Status::error) return s;
    } else if (http_iequals(name, "Expect")) {
      if (!http_iequals(value, "100-continue")) return fail(417, "unsupported Expect header");
      expect = true;
    }
  }
  if (has_te && has_length) return fail(400, "both Content-Length and Transfer-Encoding were sent");
  if (has_te && req_.version_minor == 0) return fail(400, "Transfer-Encoding is not defined for HTTP/1.0");
  req_.keep_alive = req_.version_minor >= 1 ? !close : (keep && !close);
  head_bytes_ = 0;
  if (chunked) {
    state_ = State::chunk_size;
    wants_continue_ = expect && req_.version_minor >= 1;
    return Status::need_more;
  }
  if (length > limits_.max_body_bytes)
    return fail(413, "the request body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes");
  if (length == 0) {
    state_ = State::done;
    return Status::complete;
  }
  // Grown as bytes arrive, not reserved from the header: a client that announces 32 MiB and
  // sends nothing must not make the server hold 32 MiB.
  req_.body.reserve(static_cast<size_t>(std::min<uint64_t>(length, kInitialBodyReserve)));
  remaining_ = length;
  announced_ = length;
  state_ = State::body_length;
  wants_continue_ = expect && req_.version_minor >= 1;
  return Status::need_more;
}

HttpRequest RequestParser::take() {
  HttpRequest out = std::move(req_);
  req_ = HttpRequest{};
  state_ = State::head;
  seen_request_line_ = false;
  head_bytes_ = 0;
  remaining_ = 0;
  announced_ = 0;
  wants_continue_ = false;
  compact();
  return out;
}

}  // namespace ds::server
