// Fuzz target: bytes from a client -> RequestParser (server/http_parser.h), fed in pieces whose
// sizes come from the input itself, with small limits so that every limit is reachable.
// Invariants: a complete request respects the limits and parses the same fed whole; an error
// is one of the statuses the parser documents; nothing crashes, leaks or reads out of bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/http_parser.h"

using ds::server::HttpLimits;
using ds::server::RequestParser;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  HttpLimits limits;
  limits.max_head_bytes = 512;
  limits.max_header_count = 8;
  limits.max_target_bytes = 128;
  limits.max_body_bytes = 256;
  const size_t step = 1 + data[0] % 17;  // piece size
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);

  RequestParser pieces(limits), whole(limits);
  auto sw = whole.feed(input);
  int requests = 0;
  RequestParser::Status s = RequestParser::Status::need_more;
  for (size_t i = 0; i < input.size(); i += step) {
    s = pieces.feed(input.substr(i, step));
    while (s == RequestParser::Status::complete) {
      const auto r = pieces.take();
      check(r.body.size() <= limits.max_body_bytes);
      check(r.headers.size() <= limits.max_header_count);
      check(!r.path.empty());
      // The same request comes out of the parser fed all at once.
      check(sw == RequestParser::Status::complete);
      const auto w = whole.take();
      check(w.method == r.method && w.target == r.target && w.body == r.body && w.headers == r.headers);
      sw = whole.parse();
      ++requests;
      s = pieces.parse();
    }
    if (s == RequestParser::Status::error) break;
  }
  if (s == RequestParser::Status::error) {
    const int st = pieces.error_status();
    check(st == 400 || st == 413 || st == 414 || st == 417 || st == 431 || st == 501 || st == 505);
    check(!pieces.error_message().empty());
  }
  check(pieces.pending() <= input.size());
  (void)requests;
  return 0;
}
