// Reading and compiling a request's structured-output constraint (structured_output.h).
#include "server/structured_output.h"

#include "model/grammar/ebnf.h"
#include "model/grammar/json_schema.h"
#include "model/grammar/regex.h"
#include "server/api_error.h"
#include "server/request_params.h"

namespace ds::server {
namespace {

const Json* field(const Json& obj, const char* key) { return get_field(obj, key); }

std::string string_of(const Json& v, const std::string& param) {
  if (!v.is_string() || v.get<std::string>().empty()) throw bad_request("'" + param + "' must be a non-empty string", param);
  return v.get<std::string>();
}

// A schema given as an object (or boolean), or as its JSON text.
Json schema_of(const Json& v, const std::string& param) {
  if (v.is_object() || v.is_boolean()) return v;
  if (v.is_string()) {
    Json parsed = parse_json(v.get<std::string>());
    if (parsed.is_discarded()) throw bad_request("'" + param + "' is not valid JSON", param);
    return parsed;
  }
  throw bad_request("'" + param + "' must be a JSON schema (an object)", param);
}

std::vector<std::string> choices_of(const Json& v, const std::string& param) {
  if (!v.is_array() || v.empty()) throw bad_request("'" + param + "' must be a non-empty list of strings", param);
  std::vector<std::string> out;
  for (const Json& c : v) {
    if (!c.is_string()) throw bad_request("'" + param + "' must be a non-empty list of strings", param);
    out.push_back(c.get<std::string>());
  }
  return out;
}

grammar::Grammar build_constraint(const OutputConstraint& c, grammar::JsonSchemaOptions options,
                                  const grammar::CompileBudget& budget) {
  options.budget = &budget;
  using Kind = OutputConstraint::Kind;
  switch (c.kind) {
    case Kind::json_object: return grammar::json_object_grammar(options);
    case Kind::json_schema: return grammar::json_schema_grammar(c.schema, options);
    case Kind::grammar: return grammar::parse_ebnf(c.text);
    case Kind::regex: {
      grammar::Grammar g;
      g.set_root(g.add_rule("root", grammar::regex_expr(c.text, grammar::RegexMode::whole_text, true, &budget)));
      return g;
    }
    case Kind::choice: {
      std::vector<grammar::ExprPtr> alts;
      for (const std::string& s : c.choices) alts.push_back(grammar::bytes(s));
      grammar::Grammar g;
      g.set_root(g.add_rule("root", grammar::alt(std::move(alts))));
      return g;
    }
    default: break;
  }
  throw grammar::GrammarError("no constraint");
}

}  // namespace

OutputConstraint parse_output_constraint(const Json& body) {
  std::vector<OutputConstraint> found;
  if (const Json* rf = field(body, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      throw bad_request("'response_format' must be an object with a 'type'", "response_format");
    const std::string type = (*rf)["type"].get<std::string>();
    OutputConstraint c;
    c.param = "response_format";
    if (type == "json_object") {
      c.kind = OutputConstraint::Kind::json_object;
    } else if (type == "json_schema") {
      const Json* js = field(*rf, "json_schema");
      if (!js || !js->is_object())
        throw bad_request("'response_format.json_schema' must be an object", "response_format.json_schema");
      const Json* schema = field(*js, "schema");
      if (!schema) throw bad_request("'response_format.json_schema.schema' is required", "response_format.json_schema.schema");
      c.kind = OutputConstraint::Kind::json_schema;
      c.param = "response_format.json_schema.schema";
      c.schema = schema_of(*schema, c.param);
    } else if (type != "text") {
      throw unsupported_field("response_format",
                              "'type' must be \"text\", \"json_object\" or \"json_schema\", not \"" + type + "\"");
    }
    if (c.kind != OutputConstraint::Kind::none) found.push_back(std::move(c));
  }
  if (const Json* so = field(body, "structured_outputs")) {
    if (!so->is_object()) throw bad_request("'structured_outputs' must be an object", "structured_outputs");
    for (const char* k : {"structural_tag", "whitespace_pattern"})
      if (field(*so, k)) throw unsupported_field(std::string("structured_outputs.") + k);
    const bool compact = so->value("disable_any_whitespace", false);
    auto add = [&](OutputConstraint c) {
      c.compact_json = compact;
      found.push_back(std::move(c));
    };
    if (const Json* v = field(*so, "json")) {
      OutputConstraint c{OutputConstraint::Kind::json_schema, schema_of(*v, "structured_outputs.json"), {}, {}, false,
                         "structured_outputs.json"};
      add(std::move(c));
    }
    if (const Json* v = field(*so, "regex"))
      add({OutputConstraint::Kind::regex, nullptr, string_of(*v, "structured_outputs.regex"), {}, false,
           "structured_outputs.regex"});
    if (const Json* v = field(*so, "choice"))
      add({OutputConstraint::Kind::choice, nullptr, {}, choices_of(*v, "structured_outputs.choice"), false,
           "structured_outputs.choice"});
    if (const Json* v = field(*so, "grammar"))
      add({OutputConstraint::Kind::grammar, nullptr, string_of(*v, "structured_outputs.grammar"), {}, false,
           "structured_outputs.grammar"});
    if (const Json* v = field(*so, "json_object"); v && v->is_boolean() && v->get<bool>())
      add({OutputConstraint::Kind::json_object, nullptr, {}, {}, false, "structured_outputs.json_object"});
  }
  if (field(body, "guided_whitespace_pattern")) throw unsupported_field("guided_whitespace_pattern");
  if (const Json* v = field(body, "guided_json"))
    found.push_back({OutputConstraint::Kind::json_schema, schema_of(*v, "guided_json"), {}, {}, false, "guided_json"});
  if (const Json* v = field(body, "guided_regex"))
    found.push_back({OutputConstraint::Kind::regex, nullptr, string_of(*v, "guided_regex"), {}, false, "guided_regex"});
  if (const Json* v = field(body, "guided_choice"))
    found.push_back({OutputConstraint::Kind::choice, nullptr, {}, choices_of(*v, "guided_choice"), false, "guided_choice"});
  if (const Json* v = field(body, "guided_grammar"))
    found.push_back({OutputConstraint::Kind::grammar, nullptr, string_of(*v, "guided_grammar"), {}, false,
                     "guided_grammar"});
  if (found.size() > 1)
    throw bad_request("'" + found[0].param + "' and '" + found[1].param + "' both constrain the output; give one",
                      found[1].param);
  return found.empty() ? OutputConstraint{} : std::move(found[0]);
}

grammar::Grammar with_optional_reasoning(grammar::Grammar g) {
  using namespace grammar;
  const int32_t inner = g.root();
  const ExprPtr think = seq({bytes("<think>"), text_until("</think>"), repeat(bytes("\n"), 0, 2)});
  g.set_root(g.add_rule("reasoning_then_output", seq({optional(think), rule_ref(inner)})));
  return g;
}

std::shared_ptr<const grammar::CompiledGrammar> cached_grammar(GrammarCache& cache, const std::string& key,
                                                               GrammarCache::Build build, const GrammarCache::Gone& gone,
                                                               const std::string& prefix, const std::string& param) {
  try {
    return cache.get(key, std::move(build), gone);
  } catch (const grammar::GrammarError& e) {
    throw bad_request(prefix + e.what(), param);
  } catch (const GrammarBusy& e) {
    throw unavailable(e.what(), "grammar_queue_full");
  } catch (const grammar::CompileCancelled&) {
    throw client_closed("the client closed the connection while its structured-output grammar compiled");
  }
}

std::shared_ptr<const grammar::CompiledGrammar> compile_output_constraint(const OutputConstraint& c,
                                                                          GrammarCache& cache,
                                                                          bool optional_reasoning,
                                                                          const GrammarCache::Gone& gone) {
  using Kind = OutputConstraint::Kind;
  if (c.kind == Kind::none) return nullptr;
  grammar::JsonSchemaOptions options;
  options.whitespace.none = c.compact_json;
  std::string key = std::to_string(static_cast<int>(c.kind)) + (c.compact_json ? "c" : "") +
                    (optional_reasoning ? "r\n" : "\n");
  switch (c.kind) {
    case Kind::json_schema: key += dump_json(c.schema); break;
    case Kind::regex:
    case Kind::grammar: key += c.text; break;
    case Kind::choice:
      for (const std::string& s : c.choices) key += dump_json(Json(s)) + "\n";
      break;
    default: break;
  }
  // The build runs on a compile worker and may outlive this request: it owns its inputs.
  auto build = [c, options, optional_reasoning](const grammar::CompileBudget& budget) -> grammar::Grammar {
    grammar::Grammar g = build_constraint(c, options, budget);
    return optional_reasoning ? with_optional_reasoning(std::move(g)) : g;
  };
  return cached_grammar(cache, key, build, gone, "'" + c.param + "' cannot be used: ", c.param);
}

}  // namespace ds::server
