// IncrementalDetokenizer: turns a stream of generated ids into text pieces for streaming.
//
// Guarantees (tested against Tokenizer::decode):
//  * every piece returned by push() and flush() is valid UTF-8: bytes of a character split
//    across tokens are held back until the character is complete;
//  * the pieces of a stream, concatenated, equal decode(all ids, skip_special) exactly,
//    including U+FFFD for invalid sequences, which are emitted as soon as they are known to be
//    invalid, and for a sequence left incomplete when the stream ends (flush()).
// This works because byte-level decoding is a plain concatenation of token bytes followed by
// one lossy UTF-8 conversion, which utf8::lossy_prefix can perform in steps.
//
// One detokenizer per sequence; it holds a reference to the Tokenizer, which must outlive it.
// Not thread-safe (one sequence is streamed by one thread).
#pragma once

#include <cstdint>
#include <string>

#include "model/tokenizer/tokenizer.h"

namespace ds::tok {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = false);

  // Adds one id; returns the text that became final (possibly empty).
  std::string push(int32_t id);
  // Ends the stream: returns the held-back bytes, converted lossily (empty if none).
  std::string flush();

  // Bytes held back (an incomplete UTF-8 sequence, at most 3 bytes).
  std::size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace ds::tok
