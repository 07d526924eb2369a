// SseParser: the text/event-stream framing (the WHATWG server-sent events rules an OpenAI
// stream uses), fed bytes as they arrive in any split, handing over each event's data.
//
// Lines end in LF, CRLF or CR; "data:" lines of one event are joined with LF; a blank line
// ends the event; comment lines (":" first, e.g. keep-alives) and other fields are ignored.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace ds::bench {

class SseParser {
 public:
  using OnData = std::function<void(std::string_view data)>;
  explicit SseParser(OnData on_data) : on_data_(std::move(on_data)) {}

  void feed(std::string_view bytes);
  // The stream closed: an event whose blank line never came is still delivered.
  void finish();

 private:
  void line(std::string_view l);
  void dispatch();

  OnData on_data_;
  std::string pending_;  // an incomplete line
  std::string data_;     // the current event's data
  bool has_data_ = false;
  bool after_cr_ = false;  // the last byte was CR (a following LF belongs to it)
};

}  // namespace ds::bench
