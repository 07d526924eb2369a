// Named server-sent events ("event: <name>\ndata: <json>\n\n"), as the Anthropic Messages and
// OpenAI Responses streams send them; every event's name must equal its data's "type".
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "server/json.h"

namespace ds::test {

struct NamedEvent {
  std::string name;
  server::Json data;
};

inline std::vector<NamedEvent> parse_named_events(const std::string& text) {
  std::vector<NamedEvent> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find("\n\n", pos);
    REQUIRE(end != std::string::npos);
    const std::string block = text.substr(pos, end - pos);
    pos = end + 2;
    if (block.rfind(":", 0) == 0) continue;  // a keep-alive comment
    REQUIRE(block.rfind("event: ", 0) == 0);
    const size_t nl = block.find('\n');
    REQUIRE(nl != std::string::npos);
    REQUIRE(block.substr(nl + 1, 6) == "data: ");
    NamedEvent e{block.substr(7, nl - 7), server::Json::parse(block.substr(nl + 7))};
    CHECK(e.data["type"] == e.name);
    out.push_back(std::move(e));
  }
  return out;
}

inline std::vector<std::string> event_names(const std::vector<NamedEvent>& events) {
  std::vector<std::string> n;
  for (const auto& e : events) n.push_back(e.name);
  return n;
}

}  // namespace ds::test
