// The one exception type of the tokenizer library.
//
// Loading throws it for a missing or unreadable file, malformed JSON and any component of
// tokenizer.json this implementation does not support; the message always names the file and
// the offending field. Encoding and decoding never throw it for bad input text or unknown ids
// (invalid UTF-8 is replaced, unknown ids are skipped, as HF does).
#pragma once

#include <stdexcept>

namespace ds::tok {

class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ds::tok
