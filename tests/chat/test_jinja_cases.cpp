// jinja2 itself as the oracle: tests/chat/jinja_cases.json holds small templates rendered by
// jinja2 configured as HF configures it (make_jinja_cases.py). Every render must match
// exactly; every failure must fail here too, with the same kind of error.
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/chat/chat_template.h"

using ds::chat::ChatTemplate;
using ordered_json = nlohmann::ordered_json;

namespace {

// Where jinja2 fails at render time but this engine refuses the template when parsing it.
bool refused_at_parse(const std::string& src) { return src.find("{% include") != std::string::npos; }

}  // namespace

TEST_CASE("jinja2 oracle: renders and errors", "[chat][jinja]") {
  std::ifstream in(std::string(DS_CHAT_TEST_DIR) + "/jinja_cases.json");
  REQUIRE(in.good());
  const ordered_json ref = ordered_json::parse(in);
  const ordered_json& vars = ref.at("variables");
  const auto& cases = ref.at("cases");
  REQUIRE(cases.size() >= 190);
  for (const auto& c : cases) {
    const std::string src = c.at("template");
    INFO("template: " << src);
    std::string kind = "none", message;
    std::string rendered;
    try {
      rendered = ChatTemplate::from_source(src, "case").render_variables(vars);
    } catch (const ds::chat::TemplateSyntaxError& e) {
      kind = "syntax";
      message = e.what();
    } catch (const ds::chat::TemplateRaisedError& e) {
      kind = "raised";
      message = e.what();
    } catch (const ds::chat::TemplateRuntimeError& e) {
      kind = "runtime";
      message = e.what();
    }
    if (c.contains("rendered")) {
      INFO("error: " << message);
      CHECK(kind == "none");
      CHECK(rendered == c.at("rendered").get<std::string>());
      continue;
    }
    const auto& err = c.at("error");
    INFO("jinja2: " << err.dump() << "  ours: " << message);
    if (refused_at_parse(src)) {
      CHECK(kind == "syntax");
    } else {
      CHECK(kind == err.at("kind").get<std::string>());
    }
    if (kind == "raised") CHECK(message == err.at("message").get<std::string>());
  }
}
