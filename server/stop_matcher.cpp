#include "server/stop_matcher.h"

#include <algorithm>

#include "server/partial_match.h"

namespace ds::server {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops, bool include_stop)
    : stops_(std::move(stops)), include_stop_(include_stop) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopStringMatcher::Result StopStringMatcher::push(std::string_view piece) {
  Result r;
  if (stopped_) return r;
  if (stops_.empty()) {
    r.text.assign(piece);
    return r;
  }
  std::string buf = std::move(held_);
  held_.clear();
  buf.append(piece);

  // The stop string that is complete first wins (the least end position), as it would in
  // a token-by-token stream, so the answer does not depend on how the text was split; at
  // one end position the longest (it starts first).
  size_t best = std::string::npos, best_end = std::string::npos;
  const std::string* hit = nullptr;
  for (const std::string& s : stops_) {
    const size_t p = buf.find(s);
    if (p == std::string::npos) continue;
    const size_t end = p + s.size();
    if (end < best_end || (end == best_end && p < best)) {
      best = p;
      best_end = end;
      hit = &s;
    }
  }
  if (hit) {
    stopped_ = true;
    r.stopped = true;
    r.matched = *hit;
    r.text = buf.substr(0, include_stop_ ? best + hit->size() : best);
    return r;
  }

  // Hold the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) hold = std::max(hold, partial_tag_tail(buf, s));
  held_ = buf.substr(buf.size() - hold);
  buf.resize(buf.size() - hold);
  r.text = std::move(buf);
  return r;
}

std::string StopStringMatcher::flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace ds::server
