// partial_tag_tail: how much of the end of streamed text could still grow into a tag.
//
// The streaming parsers (stop strings, <think> reasoning, <tool_call> blocks) hold back the
// longest tail of the text received so far that is a proper prefix of a tag they look for,
// until the next piece shows whether the tag completes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace ds::server {

// Length of the longest tail of `s` that is a proper prefix of `tag` (0 when `tag` is empty).
inline size_t partial_tag_tail(std::string_view s, std::string_view tag) {
  if (tag.empty()) return 0;
  const size_t max_len = std::min(tag.size() - 1, s.size());
  for (size_t len = max_len; len > 0; --len)
    if (s.substr(s.size() - len) == tag.substr(0, len)) return len;
  return 0;
}

}  // namespace ds::server
