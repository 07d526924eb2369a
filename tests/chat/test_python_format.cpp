// Python's text forms (py_format.h) against CPython's own output: float repr, str()/repr() of
// containers, json.dumps as HF's tojson calls it.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/chat/py_format.h"
#include "model/chat/template_error.h"

using ds::chat::JsonOptions;
using ds::chat::Value;

TEST_CASE("float repr matches CPython", "[chat][pyformat]") {
  // Pairs produced by CPython 3.11's repr().
  const std::pair<double, const char*> cases[] = {
      {0.1, "0.1"},
      {1e+16, "1e+16"},
      {1.5e+16, "1.5e+16"},
      {1e-05, "1e-05"},
      {0.0001, "0.0001"},
      {1.2345678901234568e+17, "1.2345678901234568e+17"},
      {1.0 / 3.0, "0.3333333333333333"},
      {2.5, "2.5"},
      {-0.0, "-0.0"},
      {1e+22, "1e+22"},
      {5e-324, "5e-324"},
      {1.7976931348623157e+308, "1.7976931348623157e+308"},
      {100.0, "100.0"},
      {1234567890123456.0, "1234567890123456.0"},
      {0.00012345, "0.00012345"},
      {-1.5e-10, "-1.5e-10"},
  };
  for (const auto& [v, text] : cases) {
    INFO(text);
    CHECK(ds::chat::py_float_repr(v) == text);
  }
  CHECK(ds::chat::py_float_repr(1e300 * 1e300) == "inf");
}

TEST_CASE("str() of containers uses repr of the elements", "[chat][pyformat]") {
  const auto j = nlohmann::ordered_json::parse(
      R"({"a": ["x", "it's", "q\"", "\n\t\\", null, true, 1.0], "é": "\u0000\u00a0\u2028😀"})");
  CHECK(ds::chat::py_str(Value::from_json(j)) ==
        "{'a': ['x', \"it's\", 'q\"', '\\n\\t\\\\', None, True, 1.0], 'é': '\\x00\\xa0\\u2028😀'}");
  CHECK(ds::chat::py_str(Value::list({Value(1)}, true)) == "(1,)");
  CHECK(ds::chat::py_str(Value::list({}, true)) == "()");
}

TEST_CASE("json.dumps forms of tojson", "[chat][pyformat]") {
  const auto j = nlohmann::ordered_json::parse(R"({"a": [1, {"b": null}], "c": "é\u2028\u007f\u001f"})");
  JsonOptions indented;
  indented.indent = "  ";
  indented.item_separator.assign(1, ',');  // (operator= from a literal trips GCC 12 bug 105329)
  CHECK(ds::chat::py_json_dumps(Value::from_json(j), indented) ==
        "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": \"é\u2028\x7f\\u001f\"\n}");
  JsonOptions ascii;
  ascii.ensure_ascii = true;
  CHECK(ds::chat::py_json_dumps(Value::from_json(nlohmann::ordered_json::parse(R"({"c": "é😀"})")), ascii) ==
        "{\"c\": \"\\u00e9\\ud83d\\ude00\"}");
  JsonOptions plain;
  CHECK(ds::chat::py_json_dumps(Value::from_json(nlohmann::ordered_json::parse(R"({"z": 1, "a": [1.5, 2]})")), plain) ==
        "{\"z\": 1, \"a\": [1.5, 2]}");
  CHECK_THROWS_AS(ds::chat::py_json_dumps(Value(), plain), ds::chat::TemplateError);
}
