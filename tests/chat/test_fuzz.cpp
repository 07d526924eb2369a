// Randomized robustness of the template engine: random bytes, and random mutations of the
// real chat templates, through the parser and the renderer. Anything may be an error; nothing
// may crash, hang or leak (the ASan build checks the last).
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/chat/chat_template.h"
#include "tests/test_paths.h"

using ordered_json = nlohmann::ordered_json;

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* const kFragments[] = {
    "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", " if ", " for ", " in ",
    " endif ", " endfor ", " set ", " macro ", " endmacro ", " call ", " endcall ", "(", ")",
    "[", "]", "{", "}", "'", "\"", "|", ".", ",", ":", "=", "==", "~", "+", "*", "**", "//",
    " not ", " and ", " or ", " is ", " defined ", "messages", "loop.index", "ns.x", "tojson",
    "namespace(", "range(", "raise_exception(", "caller()", "\n", " ", "x", "1", "-1", "[::-1]",
    " else ", " elif ", " break ", " continue ", "{% raw %}", "{% endraw %}", "\\", "é", "\xff"};

std::string random_template(std::mt19937& rng) {
  std::string s;
  const std::size_t n = rng() % 40;
  for (std::size_t i = 0; i < n; ++i) {
    if (rng() % 5 == 0)
      s += static_cast<char>(rng() % 256);
    else
      s += kFragments[rng() % std::size(kFragments)];
  }
  return s;
}

std::string mutate(std::string s, std::mt19937& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const std::size_t pos = rng() % s.size();
    switch (rng() % 4) {
      case 0: s.erase(pos, 1 + rng() % 8); break;
      case 1: s.insert(pos, kFragments[rng() % std::size(kFragments)]); break;
      case 2: s[pos] = static_cast<char>(rng() % 256); break;
      default: {
        const std::size_t from = rng() % s.size();
        s.insert(pos, s.substr(from, 1 + rng() % 20));
      }
    }
  }
  return s;
}

void try_render(const std::string& src, const ordered_json& messages, const ordered_json& kwargs) {
  try {
    auto t = ds::chat::ChatTemplate::from_source(src, "fuzz");
    ds::chat::RenderLimits limits;
    limits.max_steps = 20000;
    t.set_limits(limits);
    const std::string out = t.render(messages, kwargs, true);
    REQUIRE(out.size() <= limits.max_string_bytes);
  } catch (const ds::chat::TemplateError&) {
    // Expected for most inputs.
  }
}

}  // namespace

TEST_CASE("fuzz: random and mutated templates never crash or hang", "[chat][fuzz]") {
  const ordered_json messages = ordered_json::parse(R"([
      {"role": "system", "content": "sys"},
      {"role": "user", "content": [{"type": "text", "text": "hi"}]},
      {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
      {"role": "tool", "content": "out"}])");
  const ordered_json kwargs = ordered_json::parse(R"({"tools": [{"type": "function", "function": {"name": "f"}}], "enable_thinking": false})");
  const std::string seeds[] = {read(ds::test::data_path("chat-templates/qwen35_style.jinja")),
                               read(ds::test::data_path("tiny-qwen35/chat_template.jinja"))};
  REQUIRE(!seeds[0].empty());
  std::mt19937 rng(4242);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  int rounds = 0;
  while (rounds < 20000 && std::chrono::steady_clock::now() < deadline) {
    ++rounds;
    if (rounds % 2)
      try_render(random_template(rng), messages, kwargs);
    else
      try_render(mutate(seeds[rng() % 2], rng), messages, kwargs);
  }
  INFO("rounds: " << rounds);
  CHECK(rounds > 100);
}

TEST_CASE("fuzz: random message JSON through the real templates", "[chat][fuzz]") {
  const auto tmpl = ds::chat::ChatTemplate::from_file(ds::test::data_path("chat-templates/qwen35_style.jinja"));
  std::mt19937 rng(99);
  const char* const roles[] = {"system", "user", "assistant", "tool", "other", ""};
  const auto random_value = [&](auto& self, int depth) -> ordered_json {
    switch (rng() % (depth > 2 ? 5 : 7)) {
      case 0: return nullptr;
      case 1: return static_cast<int64_t>(rng()) - 2147483648LL;
      case 2: return (rng() % 1000) / 7.0;
      case 3: return rng() % 2 == 0;
      case 4: {
        std::string s;
        for (unsigned i = 0, n = rng() % 12; i < n; ++i) s += "ab <think></think>\n é"[rng() % 23];
        return s;
      }
      case 5: {
        ordered_json a = ordered_json::array();
        for (unsigned i = 0, n = rng() % 3; i < n; ++i) a.push_back(self(self, depth + 1));
        return a;
      }
      default: {
        ordered_json o = ordered_json::object();
        const char* const keys[] = {"type", "text", "name", "arguments", "function", "content"};
        for (unsigned i = 0, n = rng() % 3; i < n; ++i) o[keys[rng() % 6]] = self(self, depth + 1);
        return o;
      }
    }
  };
  for (int round = 0; round < 500; ++round) {
    ordered_json messages = ordered_json::array();
    for (unsigned i = 0, n = rng() % 5; i < n; ++i) {
      ordered_json m = {{"role", roles[rng() % std::size(roles)]}, {"content", random_value(random_value, 0)}};
      if (rng() % 3 == 0) m["tool_calls"] = random_value(random_value, 0);
      if (rng() % 4 == 0) m["reasoning_content"] = random_value(random_value, 1);
      messages.push_back(std::move(m));
    }
    try {
      tmpl.render(messages, ordered_json::object(), rng() % 2 == 0);
    } catch (const ds::chat::TemplateError&) {
    }
  }
  SUCCEED("no crash");
}
