// The streaming text pipeline pieces: stop strings, the reasoning split, tool-call parsing,
// and the per-choice pipeline on real token ids of the bundled tokenizer. Each streaming
// component is checked against the same input given whole, split at every byte, and split
// at random points: the emitted pieces must concatenate to the whole-input answer, and
// nothing may be emitted that the whole-input answer does not contain at that point.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.h"
#include "server/choice_output.h"
#include "server/reasoning_splitter.h"
#include "server/stop_matcher.h"
#include "server/tool_call_parser.h"
#include "tests/test_paths.h"

using namespace ds::server;

namespace {

std::vector<std::string> split_random(const std::string& s, std::mt19937& rng) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = std::uniform_int_distribution<size_t>(1, 6)(rng);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::vector<std::string> split_bytes(const std::string& s) {
  std::vector<std::string> out;
  for (char c : s) out.emplace_back(1, c);
  return out;
}

// What a stop matcher must produce for the whole text: cut before the stop string that is
// complete first (least end; at equal ends the one starting first).
std::string expected_stop_output(const std::string& text, const std::vector<std::string>& stops, bool& stopped) {
  size_t best = std::string::npos, best_end = std::string::npos;
  for (const auto& s : stops) {
    const size_t p = text.find(s);
    if (p == std::string::npos) continue;
    if (p + s.size() < best_end || (p + s.size() == best_end && p < best)) {
      best = p;
      best_end = p + s.size();
    }
  }
  stopped = best != std::string::npos;
  return stopped ? text.substr(0, best) : text;
}

}  // namespace

TEST_CASE("stop strings: never emitted, not even in part, however the text is split", "[stop]") {
  const std::vector<std::string> stops = {"STOP", "\n\nUser:", "ab", "xyzw", "yz"};
  const std::vector<std::string> texts = {"hello STOP world", "no stop here at all", "x\n\nUser: hi",
                                          "a\n\nUse and a and abba", "STO", "partial ST", "ends with \n\nUser", "0xyzw1", "xyz", "xy"};
  std::mt19937 rng(7);
  for (const auto& text : texts) {
    bool stopped = false;
    const std::string expected = expected_stop_output(text, stops, stopped);
    for (int trial = 0; trial < 20; ++trial) {
      const auto pieces = trial == 0 ? std::vector<std::string>{text} : trial == 1 ? split_bytes(text) : split_random(text, rng);
      StopStringMatcher m(stops);
      std::string out;
      bool hit = false;
      for (const auto& p : pieces) {
        auto r = m.push(p);
        out += r.text;
        // Whatever has been shown is a prefix of the answer for the whole text.
        REQUIRE(expected.compare(0, out.size(), out) == 0);
        if (r.stopped) {
          hit = true;
          break;
        }
      }
      if (!hit) out += m.flush();
      CHECK(out == expected);
      CHECK(hit == stopped);
    }
  }
}

TEST_CASE("stop strings: the first to complete wins, include_stop keeps it", "[stop]") {
  StopStringMatcher m({"world", "lo w"});
  auto r = m.push("hello world");
  CHECK(r.stopped);
  CHECK(r.text == "hel");
  CHECK(r.matched == "lo w");
  StopStringMatcher m2({"abcd", "bc"});
  CHECK(m2.push("xabcd").text == "xa");

  StopStringMatcher inc({"END"}, true);
  auto a = inc.push("abc E");
  CHECK(a.text == "abc ");
  auto b = inc.push("ND tail");
  CHECK(b.stopped);
  CHECK(b.text == "END");
  CHECK(inc.push("more").text.empty());
}

TEST_CASE("stop strings: multibyte text is cut only at character boundaries", "[stop]") {
  StopStringMatcher m({"\xC3\xA9t\xC3\xA9"});  // "été"
  std::string out;
  for (const auto& p : split_bytes("caf\xC3\xA9 \xC3\xA9t\xC3\xA9")) {  // "café été"
    auto r = m.push(p);
    out += r.text;
    if (r.stopped) break;
  }
  CHECK(out == "caf\xC3\xA9 ");
}

TEST_CASE("reasoning: <think> blocks go to reasoning, split anywhere", "[reasoning]") {
  struct Case {
    bool start;
    std::string text, reasoning, content;
  };
  const std::vector<Case> cases = {
      {true, "let me think\n</think>\n\nThe answer is 4.", "let me think\n", "The answer is 4."},
      {false, "<think>\nhmm</think>\n\nYes.", "hmm", "Yes."},
      {false, "plain answer with < and </ and <thin", "", "plain answer with < and </ and <thin"},
      {true, "never closed", "never closed", ""},
      {false, "a<think>b</think>c", "b", "ac"},
      // One block per reply: a later <think> is content.
      {false, "<think>a</think>b<think>c</think>", "a", "b<think>c</think>"},
  };
  std::mt19937 rng(3);
  for (const auto& c : cases) {
    for (int trial = 0; trial < 12; ++trial) {
      const auto pieces = trial == 0 ? std::vector<std::string>{c.text} : trial == 1 ? split_bytes(c.text) : split_random(c.text, rng);
      ReasoningSplitter s(c.start);
      std::string r, t;
      for (const auto& p : pieces) {
        auto o = s.push(p);
        r += o.reasoning;
        t += o.content;
      }
      auto f = s.flush();
      r += f.reasoning;
      t += f.content;
      CHECK(r == c.reasoning);
      CHECK(t == c.content);
    }
  }
  // Under a grammar, reasoning only comes first: a <think> inside the constrained text stays.
  for (const std::string& text : {std::string("{\"a\": \"<think>x</think>\"}"), std::string("  <think>r</think>{}")}) {
    ReasoningSplitter s(false, /*at_start_only=*/true);
    std::string r, t;
    for (const auto& p : split_bytes(text)) {
      auto o = s.push(p);
      r += o.reasoning;
      t += o.content;
    }
    auto f = s.flush();
    r += f.reasoning;
    t += f.content;
    if (text[0] == '{') {
      CHECK(r.empty());
      CHECK(t == text);
    } else {
      CHECK(r == "r");
      CHECK(t == "  {}");
    }
  }
  CHECK(ReasoningSplitter::prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  CHECK_FALSE(ReasoningSplitter::prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  CHECK_FALSE(ReasoningSplitter::prompt_opens_reasoning("<|im_start|>assistant\n"));
}

namespace {

struct ParsedCalls {
  std::string content;
  std::vector<std::string> ids, names, args;
};

ParsedCalls run_tool_parser(const std::vector<std::string>& pieces, const Json& tools) {
  ToolCallParser p(tools);
  ParsedCalls out;
  auto take = [&](ToolCallParser::Output o) {
    out.content += o.content;
    for (auto& d : o.calls) {
      if (d.opens) {
        REQUIRE(d.index == static_cast<int>(out.ids.size()));
        out.ids.push_back(d.id);
        out.names.push_back(d.name);
        out.args.push_back(d.arguments);
      } else {
        REQUIRE(d.index >= 0);
        REQUIRE(d.index < static_cast<int>(out.args.size()));
        out.args[static_cast<size_t>(d.index)] += d.arguments;
      }
    }
  };
  for (const auto& piece : pieces) take(p.push(piece));
  take(p.flush());
  return out;
}

const Json kWeatherTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
    "extra": {"type": "object"}, "zip": {"type": "string"}}}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
])");

}  // namespace

TEST_CASE("tool calls: Qwen XML calls become typed JSON arguments, split anywhere", "[tools]") {
  const std::string text =
      "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n<parameter=extra>\n{\"a\": [1, 2]}\n"
      "</parameter>\n<parameter=zip>\n75001\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n"
      "</function>\n</tool_call>";
  std::mt19937 rng(11);
  for (int trial = 0; trial < 25; ++trial) {
    const auto pieces = trial == 0 ? std::vector<std::string>{text} : trial == 1 ? split_bytes(text) : split_random(text, rng);
    const auto r = run_tool_parser(pieces, kWeatherTools);
    CHECK(r.content == "Let me check.\n");
    REQUIRE(r.names == std::vector<std::string>{"get_weather", "get_time"});
    CHECK(r.ids[0].rfind("call_", 0) == 0);
    CHECK(r.ids[0] != r.ids[1]);
    const Json a = Json::parse(r.args[0]);
    CHECK(a == Json::parse(R"({"city": "Paris", "days": 3, "metric": true, "extra": {"a": [1, 2]}, "zip": "75001"})"));
    CHECK(Json::parse(r.args[1]) == Json::object());
  }
}

TEST_CASE("tool calls: JSON calls of older Qwen templates, non-calls and truncated calls", "[tools]") {
  {
    const auto r = run_tool_parser(
        split_bytes("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>"), kWeatherTools);
    REQUIRE(r.names == std::vector<std::string>{"get_time"});
    CHECK(Json::parse(r.args[0]) == Json::parse(R"({"tz": "UTC"})"));
    CHECK(r.content.empty());
  }
  {
    // Not a call: given back as text, tags included.
    const auto r = run_tool_parser({"x <tool_call>just words</tool_call> y"}, kWeatherTools);
    CHECK(r.names.empty());
    CHECK(r.content == "x <tool_call>just words</tool_call> y");
  }
  {
    // Cut short by max_tokens inside a parameter: closed with what was written.
    const auto r = run_tool_parser(split_bytes("<tool_call>\n<function=get_weather>\n<parameter=city>\nPar"), kWeatherTools);
    REQUIRE(r.names == std::vector<std::string>{"get_weather"});
    CHECK(Json::parse(r.args[0]) == Json::parse(R"({"city": "Par"})"));
  }
  {
    // A parameter whose closing tag the model forgot ends at the next tag.
    const auto r = run_tool_parser(
        {"<tool_call><function=get_weather><parameter=city>Rome<parameter=days>2</parameter></function></tool_call>"},
        kWeatherTools);
    CHECK(Json::parse(r.args[0]) == Json::parse(R"({"city": "Rome", "days": 2})"));
  }
  {
    // A value of the wrong type stays a string rather than becoming something else.
    const auto r = run_tool_parser({"<tool_call><function=get_weather><parameter=days>soon</parameter></function></tool_call>"},
                                   kWeatherTools);
    CHECK(Json::parse(r.args[0]) == Json::parse(R"({"days": "soon"})"));
  }
}

TEST_CASE("choice output: token events of the bundled tokenizer through the whole pipeline", "[choice]") {
  const auto tok = ds::tok::Tokenizer::load(ds::test::data_path("tiny-qwen35"));
  const std::string reply =
      "weighing it\n</think>\n\nsure: <tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
      "</function>\n</tool_call>";
  auto ids = tok.encode(reply);
  ids.push_back(1006);  // <|im_end|>
  ChoiceOptions o;
  o.split_reasoning = true;
  o.start_in_reasoning = true;
  o.parse_tool_calls = true;
  o.tools = kWeatherTools;
  o.logprobs = true;
  o.eos_ids = {1006, 1004};
  ChoiceOutput out(tok, o);
  ChoiceDelta all;
  for (size_t i = 0; i < ids.size(); ++i) {
    ds::scheduler::RequestEvent e;
    e.token = ids[i];
    e.logprob = -0.5f;
    if (i + 1 == ids.size()) {
      e.finish = ds::scheduler::FinishReason::stop;
      e.stop_token = ids[i];
    }
    all.append(out.on_event(e));
  }
  REQUIRE(out.finished());
  CHECK(*out.finish_reason() == "tool_calls");
  CHECK(all.reasoning == "weighing it\n");
  CHECK(all.content == "sure: ");
  REQUIRE(all.tool_calls.size() >= 2);
  CHECK(all.tool_calls[0].name == "get_weather");
  CHECK(out.completion_tokens() == static_cast<int64_t>(ids.size()));
  CHECK(all.logprobs.size() == ids.size());
}

TEST_CASE("choice output: a stop string ends the choice and asks for a cancel", "[choice]") {
  const auto tok = ds::tok::Tokenizer::load(ds::test::data_path("tiny-qwen35"));
  ChoiceOptions o;
  o.stop = {"three"};
  ChoiceOutput out(tok, o);
  std::string text;
  for (int32_t id : tok.encode("one two three four")) {
    ds::scheduler::RequestEvent e;
    e.token = id;
    text += out.on_event(e).content;
    if (out.finished()) break;
  }
  CHECK(text == "one two ");
  CHECK(*out.finish_reason() == "stop");
  CHECK(out.stop_reason() == "three");
  CHECK(out.wants_cancel());
}
