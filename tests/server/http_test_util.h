// Helpers of the HTTP API tests: request bodies, and a streamed reply collected per choice.
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "tests/server/server_fixture.h"

namespace ds::test {

inline Json chat_body(const Json& messages, int max_tokens = 24) {
  return Json{{"model", "tiny-qwen35"}, {"messages", messages}, {"temperature", 0}, {"max_tokens", max_tokens}};
}

inline Json hello() { return Json::array({Json{{"role", "user"}, {"content", "Hello! Who are you?"}}}); }

// The text and finish reason of a streamed choice (chat or completions).
struct Streamed {
  std::string content, reasoning;
  std::string finish;
  std::vector<Json> tool_deltas;
  Json usage;
  int chunks = 0;
};
inline std::map<int, Streamed> collect_stream(const SseStream& s, bool chat) {
  std::map<int, Streamed> out;
  for (const auto& ev : s.events) {
    REQUIRE(ev.is_object());
    if (ev.contains("usage") && ev["usage"].is_object() && ev["choices"].empty()) {
      out[-1].usage = ev["usage"];
      continue;
    }
    REQUIRE(ev["choices"].size() == 1);
    const Json& c = ev["choices"][0];
    Streamed& st = out[c["index"].get<int>()];
    ++st.chunks;
    if (chat) {
      const Json& d = c["delta"];
      if (d.contains("content") && d["content"].is_string()) st.content += d["content"].get<std::string>();
      if (d.contains("reasoning_content")) {
        CHECK(d["reasoning_content"] == d["reasoning"]);
        st.reasoning += d["reasoning_content"].get<std::string>();
      }
      if (d.contains("tool_calls"))
        for (const auto& tc : d["tool_calls"]) st.tool_deltas.push_back(tc);
    } else {
      st.content += c["text"].get<std::string>();
    }
    if (c["finish_reason"].is_string()) st.finish = c["finish_reason"].get<std::string>();
  }
  return out;
}

}  // namespace ds::test
