// How deep a JSON text nests, found without parsing it.
//
// nlohmann's parser is iterative, but copying, comparing, printing and destroying a value
// recurse once per level: text nested deeper than any request needs must be refused before it
// is parsed. One scan serves the server's request bodies (server/json.h) and schema texts given
// to the grammar compiler (json_schema.h).
#pragma once

#include <cstddef>
#include <string_view>

namespace ds::grammar {

// Whether `text` nests arrays/objects deeper than max_depth. Brackets inside strings do not
// count; the text need not be valid JSON (a closer without an opener is ignored, so leading
// closers cannot buy extra depth).
inline bool json_nests_deeper(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

}  // namespace ds::grammar
