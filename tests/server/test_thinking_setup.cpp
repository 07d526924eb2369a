// server/thinking_setup.h without a model: the close sequence read from a chat template, the
// --reasoning-effort-budgets syntax, which budget a request gets, the template kwargs an effort
// sets, and the refusals.
#include <catch2/catch.hpp>

#include "model/chat/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "server/api_error.h"
#include "server/thinking_setup.h"
#include "tests/test_paths.h"

using namespace ds::server;
using ds::chat::ChatTemplate;

namespace {

const ds::tok::Tokenizer& tiny_tokenizer() {
  static const auto tok = ds::tok::Tokenizer::load(ds::test::data_path("tiny-qwen35"));
  return tok;
}

ThinkingFields fields(const char* json) { return parse_thinking_fields(Json::parse(json)); }

}  // namespace

TEST_CASE("thinking setup: the close sequence is </think> and what the template writes after it", "[thinking]") {
  const auto& tok = tiny_tokenizer();
  const ChatTemplate tiny = ChatTemplate::from_model_dir(ds::test::data_path("tiny-qwen35"));
  const ThinkingSetup s = make_thinking_setup(tok, &tiny, std::nullopt, {});
  REQUIRE(s.available());
  CHECK(s.open_token == tok.token_id("<think>"));
  CHECK(s.close_token == tok.token_id("</think>"));
  CHECK(s.close_text == "</think>\n\n");
  CHECK(s.close_sequence == tok.encode("</think>\n\n", true));
  CHECK_FALSE(s.template_takes_effort);
  // A template that renders no reasoning: the tag alone. One that reads reasoning_effort says so.
  const ChatTemplate plain = ChatTemplate::from_source(
      "{% for m in messages %}{{ m.content }}{% endfor %}{{ reasoning_effort or '' }}", "plain");
  const ThinkingSetup p = make_thinking_setup(tok, &plain, 5, {});
  CHECK(p.close_sequence == std::vector<int32_t>{*tok.token_id("</think>")});
  CHECK(p.template_takes_effort);
  CHECK(p.default_budget == 5);
  CHECK(make_thinking_setup(tok, nullptr, std::nullopt, {}).close_text == "</think>");
}

TEST_CASE("thinking setup: --reasoning-effort-budgets", "[thinking]") {
  const auto b = parse_effort_budgets("low=1024,medium=4096,high=16384,xhigh=0");
  CHECK(b == std::map<std::string, int64_t>{{"low", 1024}, {"medium", 4096}, {"high", 16384}, {"xhigh", 0}});
  CHECK(parse_effort_budgets("").empty());
  for (const char* bad : {"low", "low=", "low=-1", "low=1x", "huge=3", "low=1,low=2", "low=1,,high=2", "minimal=4"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_effort_budgets(bad), std::invalid_argument);
  }
}

TEST_CASE("thinking setup: a request's budget, its kwargs and the engine's spec", "[thinking]") {
  ThinkingSetup s = make_thinking_setup(tiny_tokenizer(), nullptr, 50, {{"low", 10}});
  auto budget = [&](const char* json, bool inside = true, bool closed = false) {
    const auto spec = thinking_spec(fields(json), s, inside, closed);
    REQUIRE(spec);
    CHECK(spec->validate(1024).empty());
    CHECK(spec->starts_inside == (inside && !closed));
    CHECK((spec->open_token == -1) == closed);  // thinking off: nothing the reply writes opens a block
    return spec->budget;
  };
  CHECK(budget("{}") == 50);                                   // the server's default
  CHECK(budget(R"({"reasoning_effort": "low"})") == 10);       // the effort's
  CHECK(budget(R"({"reasoning_effort": "high"})") == 50);      // an effort without one: the default
  CHECK(budget(R"({"thinking_budget": 7, "reasoning_effort": "low"})") == 7);  // the request's own
  CHECK(budget(R"({"thinking_token_budget": 0})") == 0);
  CHECK(budget(R"({"thinking_token_budget": 9})", true, true) == -1);  // the prompt closed the block
  s.default_budget.reset();
  CHECK(budget("{}") == -1);  // counted, not limited

  // Effort none / minimal turn thinking off unless the request says otherwise; a template that
  // reads reasoning_effort gets it.
  Json kw = Json::object();
  apply_effort_to_kwargs(fields(R"({"reasoning_effort": "minimal"})"), s, kw);
  CHECK(kw == Json{{"enable_thinking", false}});
  kw = Json{{"enable_thinking", true}};
  s.template_takes_effort = true;
  apply_effort_to_kwargs(fields(R"({"reasoning_effort": "none"})"), s, kw);
  CHECK(kw == Json{{"enable_thinking", true}, {"reasoning_effort", "none"}});
  kw = Json{{"reasoning_effort", "high"}};
  apply_effort_to_kwargs(fields(R"({"reasoning_effort": "low"})"), s, kw);
  CHECK(kw["reasoning_effort"] == "high");

  // Refusals: bad values, two budgets that differ, a budget a tokenizer without tags cannot keep.
  for (const char* bad : {R"({"thinking_token_budget": -1})", R"({"thinking_budget": 1.5})",
                          R"({"thinking_token_budget": "3"})", R"({"reasoning_effort": "max"})",
                          R"({"reasoning_effort": 3})", R"({"thinking_token_budget": 3, "thinking_budget": 4})"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_thinking_fields(Json::parse(bad)), ApiError);
  }
  CHECK(fields(R"({"thinking_token_budget": 3, "thinking_budget": 3})").budget == 3);
  ThinkingSetup none;  // no <think> tokens
  none.default_budget = 4;
  CHECK_FALSE(thinking_spec(fields("{}"), none, true, false));
  CHECK_THROWS_AS(thinking_spec(fields(R"({"thinking_token_budget": 3})"), none, true, false), ApiError);
}
