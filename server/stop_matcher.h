// StopStringMatcher: OpenAI `stop` strings, matched on the generated text as it streams.
//
// Text arrives in pieces (whatever the detokenizer finalised). push() returns the part that
// is safe to show: everything up to the first stop string to complete once one appears (the stop string
// itself is dropped unless include_stop), and otherwise everything except the longest tail
// that could still grow into a stop string. That tail is held back until the next piece
// proves it is not one, so a client never sees a stop string or any part of it -- even
// when the string is split across tokens. flush() releases the held tail at the end of a
// generation that did not stop on a string.
//
// Every stop string must be non-empty. Held text always starts where a stop string would
// start, so a valid UTF-8 input is only ever cut at character boundaries.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds::server {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops = {}, bool include_stop = false);

  struct Result {
    std::string text;     // safe to emit now
    bool stopped = false;  // a stop string was found; nothing after it will be emitted
    std::string matched;   // which one
  };
  Result push(std::string_view piece);
  // The held tail (empty after a stop).
  std::string flush();

  bool stopped() const { return stopped_; }
  bool active() const { return !stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  bool include_stop_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace ds::server
