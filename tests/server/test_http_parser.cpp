// RequestParser (server/http_parser.h): framing, limits and refusals, fed whole and byte by
// byte; and the JSON depth guard every untrusted JSON text goes through (server/json.h).
#include <catch2/catch.hpp>

#include <string>

#include "server/http_parser.h"
#include "server/json.h"

using ds::server::HttpLimits;
using ds::server::HttpRequest;
using ds::server::RequestParser;
using Status = RequestParser::Status;

namespace {

// Feeds `bytes` in pieces of `step` bytes; returns the status after the last piece (or the
// first complete / error).
Status feed(RequestParser& p, const std::string& bytes, size_t step) {
  Status s = Status::need_more;
  for (size_t i = 0; i < bytes.size() && s == Status::need_more; i += step) s = p.feed(bytes.substr(i, step));
  return s;
}

// The status a whole request text gets, checked to be the same fed in one piece and byte by byte.
Status parse_both_ways(const std::string& text, HttpLimits limits = {}, int* status = nullptr) {
  RequestParser whole(limits), bytewise(limits);
  const Status a = feed(whole, text, text.size() + 1);
  const Status b = feed(bytewise, text, 1);
  CHECK(a == b);
  if (a == Status::error) CHECK(whole.error_status() == bytewise.error_status());
  if (status) *status = whole.error_status();
  return a;
}

int refusal(const std::string& text, HttpLimits limits = {}) {
  int status = 0;
  CHECK(parse_both_ways(text, limits, &status) == Status::error);
  return status;
}

}  // namespace

TEST_CASE("http parser: requests are framed the same whole and byte by byte", "[http]") {
  const std::string get = "GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n\r\n";
  for (size_t step : {size_t{1}, size_t{3}, get.size()}) {
    RequestParser p;
    REQUIRE(feed(p, get, step) == Status::complete);
    const HttpRequest r = p.take();
    CHECK(r.method == "GET");
    CHECK(r.path == "/v1/models");
    CHECK(r.query == "x=1");
    CHECK(r.keep_alive);
    CHECK(r.header("authorization") == "Bearer k");
    CHECK(r.body.empty());
  }

  SECTION("Content-Length body, then a pipelined request already buffered") {
    RequestParser p;
    const std::string two = "POST /tokenize HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
                            "GET /health HTTP/1.0\r\n\r\n";
    REQUIRE(p.feed(two) == Status::complete);
    const HttpRequest a = p.take();
    CHECK(a.body == "hello");
    REQUIRE(p.parse() == Status::complete);
    const HttpRequest b = p.take();
    CHECK(b.path == "/health");
    CHECK_FALSE(b.keep_alive);  // HTTP/1.0 without keep-alive
    CHECK(p.parse() == Status::need_more);
    CHECK_FALSE(p.in_request());
  }

  SECTION("chunked body with extensions and trailers; bare LF line ends") {
    const std::string text = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "5;name=v\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: 1\r\n\r\n";
    REQUIRE(parse_both_ways(text) == Status::complete);
    RequestParser p;
    REQUIRE(p.feed(text) == Status::complete);
    CHECK(p.take().body == "hello world");
    RequestParser lf;
    REQUIRE(lf.feed("POST /x HTTP/1.1\nContent-Length: 2\nConnection: close\n\nok") == Status::complete);
    const HttpRequest r = lf.take();
    CHECK(r.body == "ok");
    CHECK_FALSE(r.keep_alive);
  }

  SECTION("Expect: 100-continue is reported once the head is in") {
    RequestParser p;
    REQUIRE(p.feed("POST /x HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n") == Status::need_more);
    CHECK(p.wants_continue());
    CHECK(p.reading_body());
    p.continue_sent();
    CHECK_FALSE(p.wants_continue());
    CHECK(p.feed("abc") == Status::complete);
  }
}

TEST_CASE("http parser: limits hold for every encoding, before the bytes arrive", "[http]") {
  HttpLimits small;
  small.max_body_bytes = 1000;
  small.max_head_bytes = 2000;
  small.max_header_count = 10;
  small.max_target_bytes = 100;

  // A Content-Length over the limit is refused at the end of the head.
  CHECK(refusal("POST /x HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", small) == 413);
  CHECK(refusal("POST /x HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", small) == 413);
  // A chunk that would cross the limit is refused from its size line alone.
  {
    RequestParser p(small);
    REQUIRE(p.feed("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == Status::need_more);
    REQUIRE(p.feed("200\r\n" + std::string(0x200, 'a') + "\r\n") == Status::need_more);
    CHECK(p.feed("2e9\r\n") == Status::error);  // 512 + 745 > 1000
    CHECK(p.error_status() == 413);
  }
  CHECK(refusal("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n", small) == 413);
  // Heads: total bytes, header count, target length.
  CHECK(refusal("GET / HTTP/1.1\r\nX: " + std::string(3000, 'a') + "\r\n\r\n", small) == 431);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 11; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
  CHECK(refusal(many + "\r\n", small) == 431);
  CHECK(refusal("GET /" + std::string(200, 'a') + " HTTP/1.1\r\n\r\n", small) == 414);
  CHECK(refusal("GET /" + std::string(5000, 'a'), small) == 414);  // no line end yet
  // Trailers count against the head limit.
  CHECK(refusal("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: " + std::string(3000, 'b') + "\r\n\r\n",
                small) == 431);
}

TEST_CASE("http parser: ambiguous or unsupported framing is refused", "[http]") {
  CHECK(refusal("POST /x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n") == 400);
  CHECK(refusal("POST /x HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n") == 400);
  CHECK(refusal("POST /x HTTP/1.1\r\nContent-Length: 3x\r\n\r\n") == 400);
  CHECK(refusal("POST /x HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") == 501);
  CHECK(refusal("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n") == 501);
  CHECK(refusal("POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/2.0\r\n\r\n") == 505);
  CHECK(refusal("GET / HTTX/1.1\r\n\r\n") == 400);
  CHECK(refusal("GET  / HTTP/1.1\r\n\r\n") == 400);
  CHECK(refusal("GET nothing HTTP/1.1\r\n\r\n") == 400);
  CHECK(refusal("G(T / HTTP/1.1\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n") == 400);
  CHECK(refusal("POST /x HTTP/1.1\r\nExpect: something\r\n\r\n") == 417);
  CHECK(refusal("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") == 400);
  CHECK(refusal("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n") == 400);
  // An absolute-form target is served by its path.
  RequestParser p;
  REQUIRE(p.feed("GET http://example.com/v1/models HTTP/1.1\r\n\r\n") == Status::complete);
  CHECK(p.take().path == "/v1/models");
}

TEST_CASE("json depth guard: deep nesting is found without recursion, strings do not count", "[http]") {
  using ds::server::json_too_deep;
  using ds::server::kMaxJsonDepth;
  const std::string deep = "{\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  CHECK(json_too_deep(deep));
  CHECK(ds::server::parse_json(deep).is_discarded());
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  CHECK_FALSE(json_too_deep(ok));
  CHECK(json_too_deep("[" + ok + "]"));
  CHECK(json_too_deep(std::string(50, ']') + "[" + ok + "]"));  // stray closers buy no depth
  CHECK(ds::server::parse_json(ok).is_array());
  // Brackets inside strings (with escaped quotes) are text.
  CHECK_FALSE(json_too_deep("{\"s\": \"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}"));
}
