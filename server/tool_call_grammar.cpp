// Qwen XML tool calls as a grammar (tool_call_grammar.h).
#include "server/tool_call_grammar.h"

#include <algorithm>
#include <deque>
#include <unordered_set>

#include "model/grammar/json_schema.h"
#include "model/grammar/regex.h"
#include "model/grammar/utf8_class.h"
#include "server/tool_call_parser.h"

namespace ds::server {
namespace {

using namespace ds::grammar;

// Raw text of a string parameter.
ExprPtr string_value(const Json& s, const CompileBudget* budget) {
  if (s.is_object()) {
    if (s.contains("const") && s["const"].is_string()) return bytes(s["const"].get<std::string>());
    if (s.contains("enum") && s["enum"].is_array()) {
      std::vector<ExprPtr> alts;
      for (const Json& v : s["enum"])
        if (v.is_string()) alts.push_back(bytes(v.get<std::string>()));
      if (!alts.empty()) return alt(std::move(alts));
    }
    if (s.contains("format") && s["format"].is_string())
      if (ExprPtr f = json_format_content(s["format"].get<std::string>())) return f;
    if (s.contains("pattern") && s["pattern"].is_string())
      return regex_expr(s["pattern"].get<std::string>(), RegexMode::tag_text_search, true, budget);
    const bool min = s.contains("minLength") && s["minLength"].is_number_integer();
    const bool max = s.contains("maxLength") && s["maxLength"].is_number_integer();
    if (min || max) {
      CodepointSet chars = CodepointSet::of(1, kMaxCodepoint).minus(CodepointSet::of('<', '<'));
      const int64_t lo = min ? s["minLength"].get<int64_t>() : 0;
      const int64_t hi = max ? s["maxLength"].get<int64_t>() : -1;
      if (lo < 0 || lo > kMaxRepeat || hi > kMaxRepeat || (hi >= 0 && hi < lo))
        throw GrammarError("bad minLength/maxLength");
      return repeat(utf8_expr(chars), static_cast<int32_t>(lo), static_cast<int32_t>(hi));
    }
  }
  return nullptr;  // free text: text_until
}

}  // namespace

Grammar tool_call_grammar(const Json& tools, const std::string& function, bool parallel, const CompileBudget* budget) {
  Grammar g;
  JsonSchemaOptions options;
  options.escape_lt = true;
  options.budget = budget;
  std::deque<Json> docs;  // the converters refer to their documents
  std::vector<ExprPtr> calls;
  const std::vector<std::string> closing = {"</parameter>", "<parameter=", "</function>", "</tool_call>"};
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& fn = tools[i]["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!function.empty() && name != function) continue;
    docs.push_back(fn.contains("parameters") && fn["parameters"].is_object() ? fn["parameters"] : Json::object());
    const Json& params = docs.back();
    JsonSchemaConverter conv(g, params, options, "tool" + std::to_string(i) + ":");
    std::vector<ExprPtr> members_list;
    std::vector<bool> required;
    if (params.contains("properties") && params["properties"].is_object()) {
      std::unordered_set<std::string> req;
      if (params.contains("required") && params["required"].is_array())
        for (const Json& r : params["required"])
          if (r.is_string()) req.insert(r.get<std::string>());
      for (auto it = params["properties"].begin(); it != params["properties"].end(); ++it) {
        const std::string& key = it.key();
        const std::string where = "tool '" + name + "' parameter '" + key + "'";
        // The markup ends a key at '>' and a value at a line break: such names cannot be written.
        if (key.empty() || key.find_first_of("<>\n\r") != std::string::npos)
          throw GrammarError(where + ": a parameter name must be non-empty and hold no '<', '>' or line break to "
                                     "be written as a tool-call parameter");
        const std::string type = tool_parameter_type(it.value());
        ExprPtr value;
        try {
          if (type.empty() || type == "string") {
            value = string_value(it.value(), budget);
          } else {
            // Only the type the parser reads the value as (a list like ["integer", "null"]
            // is read as its first non-null type).
            Json narrowed = it.value();
            narrowed["type"] = type;
            value = conv.value(narrowed, "#/properties/" + key);
          }
        } catch (const GrammarError& e) {
          throw GrammarError(where + ": " + e.what());
        }
        const ExprPtr open = bytes("<parameter=" + key + ">\n");
        members_list.push_back(value ? seq({open, value, bytes("\n</parameter>\n")})
                                     : seq({open, text_until("\n</parameter>", closing), bytes("\n")}));
        required.push_back(req.count(key) > 0);
      }
    }
    calls.push_back(seq({bytes("<tool_call>\n<function=" + name + ">\n"),
                         members(std::move(members_list), std::move(required), empty(), nullptr),
                         bytes("</function>\n</tool_call>")}));
  }
  if (calls.empty()) throw GrammarError("no tool named '" + function + "'");
  const ExprPtr call = alt(std::move(calls));
  // A reasoning model writes a line break or two after </think>.
  const ExprPtr body = parallel ? seq({call, star(seq({bytes("\n"), call}))}) : call;
  g.set_root(g.add_rule("root", seq({repeat(bytes("\n"), 0, 2), body})));
  return g;
}

}  // namespace ds::server
