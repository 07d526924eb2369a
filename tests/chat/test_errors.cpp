// Error reporting and resource bounds: syntax errors point at line:column, render errors say
// where and why, raise_exception is its own kind, loading problems name the file, and no
// template or input can run unbounded.
#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/chat/chat_template.h"
#include "tests/test_paths.h"

using ds::chat::ChatTemplate;
using ds::chat::TemplateError;
using ds::chat::TemplateRaisedError;
using ds::chat::TemplateRuntimeError;
using ds::chat::TemplateSyntaxError;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using ordered_json = nlohmann::ordered_json;

namespace {

TemplateSyntaxError syntax_error_of(const std::string& src) {
  try {
    ChatTemplate::from_source(src, "t.jinja");
  } catch (const TemplateSyntaxError& e) {
    return e;
  }
  FAIL("expected a syntax error for: " << src);
  throw std::logic_error("unreachable");
}

std::string render_error(const std::string& src, const ordered_json& vars = ordered_json::object(),
                         const ds::chat::RenderLimits* limits = nullptr) {
  auto t = ChatTemplate::from_source(src, "t.jinja");
  if (limits) t.set_limits(*limits);
  try {
    t.render_variables(vars);
  } catch (const TemplateRuntimeError& e) {
    return e.what();
  }
  return "no error";
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("ds_chat_test_" + std::to_string(::getpid()) + "_" +
            std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name) << text; }
};

}  // namespace

TEST_CASE("syntax errors carry the template name, line and column", "[chat][errors]") {
  {
    const auto e = syntax_error_of("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}");
    CHECK(e.line() == 3);
    CHECK(e.column() == 10);
    CHECK_THAT(e.what(), StartsWith("t.jinja:3:10: "));
  }
  {
    const auto e = syntax_error_of("ok\n{% for x in items %}\nno end");
    CHECK_THAT(e.what(), Contains("endfor") && Contains("t.jinja:2:4"));
  }
  {
    const auto e = syntax_error_of("{{ 'never closed }}");
    CHECK(e.line() == 1);
    CHECK(e.column() == 4);
  }
  {
    const auto e = syntax_error_of("abc\n\n   {% frobnicate %}");
    CHECK(e.line() == 3);
    CHECK(e.column() == 7);
    CHECK_THAT(e.what(), Contains("unknown tag 'frobnicate'"));
  }
  {
    const auto e = syntax_error_of("日本語 {{ x ) }}");  // columns count characters
    CHECK(e.column() == 10);
  }
  CHECK_THAT(syntax_error_of("{# open").what(), Contains("comment"));
  CHECK_THAT(syntax_error_of("{% raw %}x").what(), Contains("raw"));
  CHECK_THAT(syntax_error_of("{{ x }").what(), Contains("unexpected '}'"));
  CHECK_THAT(syntax_error_of("{{ x").what(), Contains("never closed"));
  CHECK_THAT(syntax_error_of("{{ x|nosuchfilter }}").what(), Contains("no filter named 'nosuchfilter'"));
  CHECK_THAT(syntax_error_of("{% if x is nosuchtest %}{% endif %}").what(), Contains("no test named"));
  CHECK_THAT(syntax_error_of("{% macro m(a=1, b) %}{% endmacro %}").what(), Contains("default"));
  CHECK_THAT(syntax_error_of("{% extends 'base' %}").what(), Contains("unknown tag 'extends'"));
}

TEST_CASE("render errors say where and why; raise_exception is its own kind", "[chat][errors]") {
  CHECK_THAT(render_error("{{ 1 }}\n{{ nope.x }}"), StartsWith("t.jinja:2:") && Contains("'nope' is undefined"));
  CHECK_THAT(render_error("{{ d.a.b }}", {{"d", ordered_json::object()}}),
             Contains("'dict object' has no attribute 'a'"));
  CHECK_THAT(render_error("{{ [1] + 'x' }}"), Contains("unsupported operand"));
  try {
    ChatTemplate::from_source("{{ raise_exception('Conversation roles must alternate') }}", "t")
        .render_variables(ordered_json::object());
    FAIL("expected raise_exception to throw");
  } catch (const TemplateRaisedError& e) {
    CHECK(std::string(e.what()) == "Conversation roles must alternate");
  }
}

TEST_CASE("runaway templates and inputs are bounded", "[chat][errors][limits]") {
  ds::chat::RenderLimits small;
  small.max_steps = 200000;
  CHECK_THAT(render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                          ordered_json::object(), &small),
             Contains("steps"));
  // The default budget also stops it, just later.
  CHECK_THAT(render_error("{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}"),
             Contains("steps"));
  CHECK_THAT(render_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}"), Contains("nested"));
  CHECK_THAT(render_error("{% macro w() %}{{ caller() }}{% endmacro %}"
                          "{% macro r() %}{% call w() %}{{ r() }}{% endcall %}{% endmacro %}{{ r() }}"),
             Contains("nested"));
  CHECK_THAT(render_error("{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
             Contains("too large"));
  CHECK_THAT(render_error("{{ 'x' * 1000000000000 }}"), Contains("too large"));
  CHECK_THAT(render_error("{{ [0] * 1000000000000 }}"), Contains("too large"));
  CHECK_THAT(render_error("{{ range(10000000) }}"), Contains("Range too big"));
  CHECK_THAT(render_error("{{ 2 ** 1000 }}"), Contains("overflow"));
  // Deep nesting in the source is refused when parsing.
  std::string parens = "{{ ";
  parens.append(5000, '(').append("1").append(5000, ')').append(" }}");
  CHECK_THAT(syntax_error_of(parens).what(), Contains("nested too deeply"));
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  CHECK_THAT(syntax_error_of(ifs).what(), Contains("nested too deeply"));
  std::string minuses = "{{ ";
  minuses.append(10000, '-').append("1 }}");
  CHECK_THAT(syntax_error_of(minuses).what(), Contains("nested too deeply"));
  std::string filters = "{{ x";
  for (int i = 0; i < 5000; ++i) filters += "|trim";
  filters += " }}";
  CHECK_THAT(syntax_error_of(filters).what(), Contains("nested too deeply"));
  std::string sum = "{{ 1";
  for (int i = 0; i < 5000; ++i) sum += " + 1";
  sum += " }}";
  CHECK_THAT(syntax_error_of(sum).what(), Contains("nested too deeply"));
  std::string attrs = "{{ x";
  for (int i = 0; i < 5000; ++i) attrs += ".a";
  attrs += " }}";
  CHECK_THAT(syntax_error_of(attrs).what(), Contains("nested too deeply"));
  CHECK_THAT(render_error("{% set ns = namespace(x=none) %}{% for i in range(3000) %}{% set ns.x = [ns.x] %}{% endfor %}"),
             Contains("nested more than"));
  // Deeply nested input data.
  std::string deep;
  for (int i = 0; i < 1000; ++i) deep += "[";
  for (int i = 0; i < 1000; ++i) deep += "]";
  CHECK_THROWS_AS(ChatTemplate::from_source("{{ x }}", "t").render_variables({{"x", ordered_json::parse(deep)}}),
                  TemplateRuntimeError);
  // A namespace holding itself must not leak (LeakSanitizer checks this in the ASan build).
  CHECK(ChatTemplate::from_source("{% set ns = namespace() %}{% set ns.me = ns %}ok", "t")
            .render_variables(ordered_json::object()) == "ok");
  CHECK_THAT(render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns|tojson }}"), Contains("deep"));
}

TEST_CASE("loading errors name the file", "[chat][errors]") {
  TempDir dir;
  try {
    ChatTemplate::from_model_dir((dir.path / "missing").string());
    FAIL("expected an error");
  } catch (const TemplateError& e) {
    CHECK_THAT(e.what(), Contains("missing"));
  }
  dir.write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  try {
    ChatTemplate::from_model_dir(dir.path.string());
    FAIL("expected an error");
  } catch (const TemplateError& e) {
    CHECK_THAT(e.what(), Contains("no chat template") && Contains(dir.path.string()));
  }
  dir.write("tokenizer_config.json", R"({"chat_template": "x", )");
  try {
    ChatTemplate::from_model_dir(dir.path.string());
    FAIL("expected an error");
  } catch (const TemplateError& e) {
    CHECK_THAT(e.what(), Contains("tokenizer_config.json") && Contains("invalid JSON"));
  }
  dir.write("tokenizer_config.json",
            R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ bos_token }}"}],
                "bos_token": {"content": "<s>", "lstrip": false}})");
  CHECK(ChatTemplate::from_model_dir(dir.path.string()).render(ordered_json::array(), ordered_json::object(), false) == "D<s>");
  dir.write("chat_template.jinja", "{{ messages|length }} {{ bad syntax");
  try {
    ChatTemplate::from_model_dir(dir.path.string());
    FAIL("expected an error");
  } catch (const TemplateSyntaxError& e) {
    CHECK_THAT(e.what(), Contains("chat_template.jinja:1:"));
  }
  try {
    ChatTemplate::from_model_dir(dir.path.string(), (dir.path / "nope.jinja").string());
    FAIL("expected an error");
  } catch (const TemplateError& e) {
    CHECK_THAT(e.what(), Contains("nope.jinja"));
  }
}

TEST_CASE("HF variables: kwargs, tools and documents default to None, special tokens", "[chat]") {
  auto t = ChatTemplate::from_source(
      "{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} {{ eos_token }} "
      "{{ enable_thinking is defined }} {{ messages|length }}",
      "t");
  t.set_special_tokens({{"eos_token", "<|im_end|>"}});
  CHECK(t.render(ordered_json::array({{{"role", "user"}, {"content", "x"}}}), ordered_json::object(), true) ==
        "True True True <|im_end|> False 1");
  CHECK(t.render(ordered_json::array(), {{"enable_thinking", false}, {"tools", ordered_json::array()}}, false) ==
        "False True False <|im_end|> True 0");
  // A kwarg overrides a special token, as in HF.
  CHECK_THAT(t.render(ordered_json::array(), {{"eos_token", "E"}}, false), Contains(" E "));
}

TEST_CASE("one template renders on many threads at once", "[chat]") {
  const auto t = ChatTemplate::from_file(ds::test::data_path("chat-templates/qwen35_style.jinja"));
  const ordered_json messages = ordered_json::parse(
      R"([{"role": "system", "content": "S"}, {"role": "user", "content": "Q"},
          {"role": "assistant", "content": "A", "tool_calls": [{"function": {"name": "f", "arguments": {"k": [1, 2]}}}]}])");
  const std::string expected = t.render(messages, ordered_json::object(), true);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k)
        if (t.render(messages, ordered_json::object(), true) != expected) ++mismatches;
    });
  for (auto& th : threads) th.join();
  CHECK(mismatches == 0);
}
