// JSON Schema -> expressions (json_schema.h): the converter's walk over a schema. oneOf's
// exclusiveness check is in json_schema_one_of.cpp, formats and keys in
// json_schema_strings.cpp, the shared pieces in json_schema_detail.h.
#include "model/grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <unordered_set>

#include "model/grammar/json_nesting.h"
#include "model/grammar/json_schema_detail.h"
#include "model/grammar/regex.h"

namespace ds::grammar {

using namespace detail;

namespace {

// A boolean keyword; absent or of another type: false.
bool flag(const OrderedJson& s, const char* kw) {
  const auto it = s.find(kw);
  return it != s.end() && it->is_boolean() && it->get<bool>();
}

// Depth-bounded recursion: value() nests once per schema level and per $ref hop, so a chain
// of references is bounded as nesting is (the text's own nesting is bounded before parsing).
struct DepthGuard {
  int& d;
  explicit DepthGuard(int& depth) : d(depth) {
    if (++d > kMaxSchemaDepth)
      throw GrammarError("json_schema: the schema nests more than " + std::to_string(kMaxSchemaDepth) +
                         " levels, counting $ref hops");
  }
  ~DepthGuard() { --d; }
  static constexpr int kMaxSchemaDepth = 128;
};

}  // namespace

JsonSchemaConverter::JsonSchemaConverter(Grammar& grammar, const OrderedJson& document, JsonSchemaOptions options,
                                         std::string rule_prefix)
    : g_(grammar), doc_(document), options_(options), prefix_(std::move(rule_prefix)),
      ws_(json_ws(options.whitespace)) {}

ExprPtr JsonSchemaConverter::any_value() {
  // The rules are the grammar's, shared by every converter that builds into it.
  if (any_object_ < 0) {
    any_object_ = g_.find_rule("json_any_object");
    any_array_ = g_.find_rule("json_any_array");
  }
  const bool lt = !options_.escape_lt;
  auto value_of = [&](int32_t o, int32_t a) {
    return alt({rule_ref(o), rule_ref(a), json_string(0, -1, lt), json_number(), bytes("true"), bytes("false"),
                bytes("null")});
  };
  if (any_object_ < 0) {
    any_object_ = g_.add_rule("json_any_object");
    any_array_ = g_.add_rule("json_any_array");
    const ExprPtr v = value_of(any_object_, any_array_);
    const ExprPtr sep = seq({ws_, bytes(","), ws_});
    const ExprPtr kv = seq({json_string(0, -1, lt), ws_, bytes(":"), ws_, v});
    g_.set_body(any_object_, seq({bytes("{"), ws_, separated(kv, sep, 0, -1), ws_, bytes("}")}));
    g_.set_body(any_array_, seq({bytes("["), ws_, separated(v, sep, 0, -1), ws_, bytes("]")}));
  }
  return value_of(any_object_, any_array_);
}

const OrderedJson& JsonSchemaConverter::resolve(const std::string& pointer, const std::string& where) const {
  if (pointer.empty() || pointer[0] != '#')
    schema_fail(where, "reference '" + pointer + "' is not local (only '#' and '#/...' references are supported)");
  if (pointer == "#") return doc_;
  if (pointer[1] != '/') schema_fail(where, "reference '" + pointer + "' is not a JSON pointer");
  const OrderedJson* cur = &doc_;
  size_t i = 2;
  while (i <= pointer.size()) {
    const size_t j = std::min(pointer.find('/', i), pointer.size());
    std::string tok;
    for (size_t k = i; k < j; ++k) {
      const char c = pointer[k];
      if (c == '~' && k + 1 < j && (pointer[k + 1] == '0' || pointer[k + 1] == '1')) {
        tok += pointer[k + 1] == '0' ? '~' : '/';
        ++k;
      } else if (c == '%' && k + 2 < j && std::isxdigit(static_cast<unsigned char>(pointer[k + 1])) &&
                 std::isxdigit(static_cast<unsigned char>(pointer[k + 2]))) {
        tok += static_cast<char>(std::stoi(pointer.substr(k + 1, 2), nullptr, 16));
        k += 2;
      } else {
        tok += c;
      }
    }
    if (cur->is_object() && cur->contains(tok)) {
      cur = &(*cur)[tok];
    } else if (cur->is_array() && !tok.empty() && tok.size() <= 9 && std::all_of(tok.begin(), tok.end(), ::isdigit) &&
               std::stoull(tok) < cur->size()) {
      cur = &(*cur)[std::stoull(tok)];
    } else {
      schema_fail(where, "reference '" + pointer + "' does not resolve");
    }
    i = j + 1;
  }
  return *cur;
}

const OrderedJson& JsonSchemaConverter::deref(const OrderedJson& schema, const std::string& where) const {
  const OrderedJson* s = &schema;
  for (int hops = 0; s->is_object() && s->contains("$ref") && (*s)["$ref"].is_string(); ++hops) {
    if (hops > 64) schema_fail(where, "reference chain too long");
    s = &resolve((*s)["$ref"].get<std::string>(), where);
  }
  return *s;
}

ExprPtr JsonSchemaConverter::ref(const std::string& pointer, const std::string& where) {
  auto it = ref_rules_.find(pointer);
  if (it != ref_rules_.end()) return rule_ref(it->second);
  const OrderedJson& target = resolve(pointer, where);
  const int32_t id = g_.add_rule(prefix_ + "ref" + pointer);
  ref_rules_.emplace(pointer, id);  // before the body: recursive references find it
  g_.set_body(id, value(target, pointer));
  return rule_ref(id);
}

ExprPtr JsonSchemaConverter::value(const OrderedJson& s, const std::string& where) {
  if (depth_ > 0) return schema_value(s, where);
  // A keyword of an unexpected type that a check missed (nlohmann's type_error) is still the
  // schema's fault: a 400, never a 500.
  try {
    return schema_value(s, where);
  } catch (const nlohmann::json::exception& e) {
    schema_fail(where, std::string("malformed schema: ") + e.what());
  }
}

ExprPtr JsonSchemaConverter::shared_value(const OrderedJson& s, const std::string& where) {
  const int32_t id = g_.add_rule(prefix_ + where);
  g_.set_body(id, value(s, where));
  return rule_ref(id);
}

ExprPtr JsonSchemaConverter::schema_value(const OrderedJson& s, const std::string& where) {
  DepthGuard guard(depth_);
  if (s.is_boolean()) {
    if (s.get<bool>()) return any_value();
    schema_fail(where, "the schema 'false' matches nothing");
  }
  if (!s.is_object()) schema_fail(where, "a schema must be an object or a boolean");
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (!unsupported_keywords().count(k)) continue;
    schema_fail(where, "'" + k + "' is not supported");
  }
  auto only_annotations_besides = [&](const std::string& keyword) {
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != keyword && !schema_annotations().count(it.key()))
        schema_fail(where, "'" + it.key() + "' beside '" + keyword + "' is not supported");
  };
  if (s.contains("$ref")) {
    only_annotations_besides("$ref");
    if (!s["$ref"].is_string()) schema_fail(where, "'$ref' must be a string");
    return ref(s["$ref"].get<std::string>(), where);
  }
  if (s.contains("allOf")) {
    only_annotations_besides("allOf");
    const OrderedJson& all = s["allOf"];
    if (!all.is_array() || all.size() != 1) schema_fail(where, "'allOf' is supported with exactly one schema");
    return value(all[0], where + "/allOf/0");
  }
  for (const char* kw : {"anyOf", "oneOf"}) {
    if (!s.contains(kw)) continue;
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != kw && it.key() != "nullable" && !schema_annotations().count(it.key()))
        schema_fail(where, "'" + it.key() + "' beside '" + kw + "' is not supported");
    const OrderedJson& all = s[kw];
    if (!all.is_array() || all.empty()) schema_fail(where, std::string("'") + kw + "' must be a non-empty array");
    // A false alternative matches nothing: leaving it out changes neither anyOf nor oneOf.
    OrderedJson alts = OrderedJson::array();
    for (const OrderedJson& a : all)
      if (!(a.is_boolean() && !a.get<bool>())) alts.push_back(a);
    if (alts.empty()) schema_fail(where, std::string("every alternative of '") + kw + "' is false");
    ExprPtr e;
    if (std::string(kw) == "oneOf") {
      e = one_of(alts, where);
    } else {
      std::vector<ExprPtr> items;
      for (size_t i = 0; i < alts.size(); ++i) items.push_back(value(alts[i], where + "/anyOf/" + std::to_string(i)));
      e = alt(std::move(items));
    }
    if (flag(s, "nullable")) e = alt({e, bytes("null")});
    return e;
  }
  if (s.contains("const")) return json_literal(json_text_of(s["const"]), !options_.escape_lt);
  if (s.contains("enum")) {
    const OrderedJson& values = s["enum"];
    if (!values.is_array() || values.empty()) schema_fail(where, "'enum' must be a non-empty array");
    std::vector<ExprPtr> items;
    for (const OrderedJson& v : values) items.push_back(json_literal(json_text_of(v), !options_.escape_lt));
    return alt(std::move(items));
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    const OrderedJson& t = s["type"];
    if (t.is_string()) {
      types.push_back(t.get<std::string>());
    } else if (t.is_array() && !t.empty()) {
      for (const OrderedJson& x : t) {
        if (!x.is_string()) schema_fail(where, "'type' must name types");
        types.push_back(x.get<std::string>());
      }
    } else {
      schema_fail(where, "'type' must be a string or a non-empty array of strings");
    }
  } else {
    for (const std::string& t : inferred_types(s)) types.push_back(t);
    if (types.empty()) return flag(s, "nullable") ? alt({any_value(), bytes("null")}) : any_value();
  }
  if (flag(s, "nullable") && std::find(types.begin(), types.end(), "null") == types.end())
    types.push_back("null");
  std::vector<ExprPtr> items;
  for (const std::string& t : types) items.push_back(typed(s, t, where));
  return alt(std::move(items));
}

ExprPtr JsonSchemaConverter::typed(const OrderedJson& s, const std::string& type, const std::string& where) {
  if (type == "null") return bytes("null");
  if (type == "boolean") return alt({bytes("true"), bytes("false")});
  if (type == "string") return string(s, where);
  if (type == "array") return array(s, where);
  if (type == "object") return object(s, where);
  if (type != "integer" && type != "number") schema_fail(where, "unknown type '" + type + "'");
  const bool integer = type == "integer";
  NumberBounds b;
  bool bounded = false;
  auto number_at = [&](const char* kw) -> std::optional<double> {
    if (!s.contains(kw)) return std::nullopt;
    if (!s[kw].is_number()) schema_fail(where, std::string("'") + kw + "' must be a number");
    bounded = true;
    return s[kw].get<double>();
  };
  b.lo = number_at("minimum");
  b.hi = number_at("maximum");
  // Draft 4 writes exclusiveMinimum as a flag on minimum; later drafts as a bound of its own.
  for (const bool lower : {true, false}) {
    const char* kw = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    if (!s.contains(kw)) continue;
    const OrderedJson& v = s[kw];
    std::optional<double>& bound = lower ? b.lo : b.hi;
    bool& exclusive = lower ? b.lo_exclusive : b.hi_exclusive;
    if (v.is_boolean()) {
      if (v.get<bool>()) exclusive = true;
      continue;
    }
    if (!v.is_number()) schema_fail(where, std::string("'") + kw + "' must be a number or a boolean");
    bounded = true;
    const double x = v.get<double>();
    if (!bound || (lower ? x >= *bound : x <= *bound)) {
      bound = x;
      exclusive = true;
    }
  }
  if (!bounded) return integer ? json_integer() : json_number();
  try {
    return json_number_range(b, integer);
  } catch (const GrammarError& e) {
    schema_fail(where, e.what());
  }
}

ExprPtr JsonSchemaConverter::string(const OrderedJson& s, const std::string& where) {
  auto count_at = [&](const char* kw) { return count_keyword(s, kw, where); };
  const int32_t min_len = count_at("minLength");
  const int32_t max_len = count_at("maxLength");
  if (min_len >= 0 && max_len >= 0 && max_len < min_len) schema_fail(where, "'maxLength' is below 'minLength'");
  const bool lengths = min_len >= 0 || max_len >= 0;
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) schema_fail(where, "'pattern' must be a string");
    if (lengths) schema_fail(where, "'pattern' together with 'minLength'/'maxLength' is not supported");
    try {
      return seq({bytes("\""),
                  regex_expr(s["pattern"].get<std::string>(), RegexMode::json_string_search, !options_.escape_lt,
                             options_.budget),
                  bytes("\"")});
    } catch (const GrammarError& e) {
      schema_fail(where + "/pattern", e.what());
    }
  }
  if (s.contains("format") && s["format"].is_string()) {
    if (ExprPtr f = json_format_content(s["format"].get<std::string>())) {
      if (lengths) schema_fail(where, "'format' together with 'minLength'/'maxLength' is not supported");
      return seq({bytes("\""), f, bytes("\"")});
    }
  }
  return json_string(std::max(min_len, 0), max_len, !options_.escape_lt);
}

ExprPtr JsonSchemaConverter::array(const OrderedJson& s, const std::string& where) {
  std::vector<std::pair<const OrderedJson*, std::string>> tuple;
  const OrderedJson* rest = nullptr;  // null: any value
  std::string rest_where;
  bool rest_allowed = true;
  auto set_rest = [&](const char* kw) {
    if (!s.contains(kw)) return;
    rest = &s[kw];
    rest_where = where + "/" + kw;
    if (rest->is_boolean() && !rest->get<bool>()) rest_allowed = false;
  };
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) schema_fail(where, "'prefixItems' must be an array");
    for (size_t i = 0; i < s["prefixItems"].size(); ++i)
      tuple.push_back({&s["prefixItems"][i], where + "/prefixItems/" + std::to_string(i)});
    set_rest("items");
  } else if (s.contains("items") && s["items"].is_array()) {
    for (size_t i = 0; i < s["items"].size(); ++i) tuple.push_back({&s["items"][i], where + "/items/" + std::to_string(i)});
    set_rest("additionalItems");
  } else {
    set_rest("items");
  }
  auto count_at = [&](const char* kw) { return count_keyword(s, kw, where); };
  const int32_t min_items = std::max(count_at("minItems"), 0);
  const int32_t max_items = count_at("maxItems");
  if (max_items >= 0 && max_items < min_items) schema_fail(where, "'maxItems' is below 'minItems'");
  if (flag(s, "uniqueItems") && !(max_items >= 0 && max_items <= 1))
    schema_fail(where, "'uniqueItems' is not supported (unless maxItems <= 1)");
  // A false tuple item ends the array before it.
  for (size_t i = 0; i < tuple.size(); ++i) {
    if (tuple[i].first->is_boolean() && !tuple[i].first->get<bool>()) {
      tuple.resize(i);
      rest_allowed = false;
      break;
    }
  }
  if (max_items >= 0 && static_cast<size_t>(max_items) < tuple.size()) {
    tuple.resize(static_cast<size_t>(max_items));
    rest_allowed = false;
  }
  const int32_t k = static_cast<int32_t>(tuple.size());
  if (!rest_allowed && min_items > k) schema_fail(where, "'minItems' asks for more items than the schema allows");
  const ExprPtr sep = seq({ws_, bytes(","), ws_});
  // Items are rules: inlined while that is cheap, called when a counted repetition of large
  // items would copy too much (rule_plan.h).
  ExprPtr rest_expr;
  if (rest_allowed) rest_expr = rest ? shared_value(*rest, rest_where) : any_value();
  // tail: the items after the tuple, each after a separator.
  auto tail = [&](int32_t from) -> ExprPtr {
    if (!rest_expr) return empty();
    const int32_t lo = std::max(0, min_items - from);
    const int32_t hi = max_items < 0 ? -1 : max_items - from;
    if (hi == 0) return empty();
    return repeat(seq({sep, rest_expr}), lo, hi);  // each after a separator: one copy when unbounded
  };
  ExprPtr body;
  if (k > 0) {
    ExprPtr after = tail(k);
    for (int32_t i = k - 1; i >= 1; --i) {
      ExprPtr item = seq({sep, value(*tuple[static_cast<size_t>(i)].first, tuple[static_cast<size_t>(i)].second), after});
      after = i < min_items ? item : optional(item);
    }
    ExprPtr first = seq({value(*tuple[0].first, tuple[0].second), after});
    body = min_items > 0 ? first : optional(first);
  } else if (rest_expr && max_items != 0) {
    body = separated(rest_expr, sep, min_items, max_items);
  } else {
    body = empty();
  }
  return seq({bytes("["), ws_, body, ws_, bytes("]")});
}

ExprPtr JsonSchemaConverter::object(const OrderedJson& s, const std::string& where) {
  static const OrderedJson kEmpty = OrderedJson::object();
  const OrderedJson& props = s.contains("properties") ? s["properties"] : kEmpty;
  if (!props.is_object()) schema_fail(where, "'properties' must be an object");
  // Sets, not list scans: a schema may list 100,000 properties.
  std::vector<std::string> required;
  std::unordered_set<std::string> required_set, declared;
  if (s.contains("required")) {
    const OrderedJson& r = s["required"];
    if (!r.is_array()) schema_fail(where, "'required' must be an array");
    for (const OrderedJson& x : r) {
      if (!x.is_string()) schema_fail(where, "'required' must list property names");
      if (required_set.insert(x.get<std::string>()).second) required.push_back(x.get<std::string>());
    }
  }
  for (auto it = props.begin(); it != props.end(); ++it) declared.insert(it.key());
  // What extra properties may hold: null = none.
  ExprPtr extra_value;
  if (s.contains("additionalProperties")) {
    const OrderedJson& a = s["additionalProperties"];
    if (!(a.is_boolean() && !a.get<bool>())) extra_value = shared_value(a, where + "/additionalProperties");
  } else if (options_.additional_properties_default) {
    extra_value = any_value();
  }
  auto is_required = [&](const std::string& name) { return required_set.count(name) > 0; };
  std::vector<ExprPtr> members_list;
  std::vector<bool> flags;
  std::vector<std::string> names;
  auto member = [&](const std::string& name, ExprPtr v) {
    return seq({json_literal(json_text_of(OrderedJson(name)), !options_.escape_lt), ws_, bytes(":"), ws_, std::move(v)});
  };
  for (auto it = props.begin(); it != props.end(); ++it) {
    const std::string& name = it.key();
    names.push_back(name);
    if (it.value().is_boolean() && !it.value().get<bool>()) {
      if (is_required(name)) schema_fail(where, "required property '" + name + "' has the schema 'false'");
      continue;
    }
    members_list.push_back(member(name, value(it.value(), where + "/properties/" + pointer_token(name))));
    flags.push_back(is_required(name));
  }
  for (const std::string& name : required) {
    if (declared.count(name)) continue;
    if (!extra_value)
      schema_fail(where, "required property '" + name + "' is not in 'properties' and additional properties are not allowed");
    names.push_back(name);
    members_list.push_back(member(name, extra_value));
    flags.push_back(true);
  }
  const size_t n_required = required.size();
  if (s.contains("minProperties")) {
    const OrderedJson& v = s["minProperties"];
    if (!v.is_number_integer() || v.get<int64_t>() > static_cast<int64_t>(n_required))
      schema_fail(where, "'minProperties' beyond the required properties is not supported");
  }
  if (s.contains("maxProperties")) {
    const OrderedJson& v = s["maxProperties"];
    if (!v.is_number_integer() || extra_value || v.get<int64_t>() < static_cast<int64_t>(members_list.size()))
      schema_fail(where, "'maxProperties' below the number of possible properties is not supported");
  }
  ExprPtr extra;
  if (extra_value)
    extra = seq({bytes("\""), key_content_except(names, !options_.escape_lt), bytes("\""), ws_, bytes(":"), ws_,
                 extra_value});
  const ExprPtr body = members(std::move(members_list), std::move(flags), seq({ws_, bytes(","), ws_}), extra);
  return seq({bytes("{"), ws_, body, ws_, bytes("}")});
}

Grammar json_schema_grammar(const OrderedJson& schema, const JsonSchemaOptions& options) {
  Grammar g;
  JsonSchemaConverter c(g, schema, options);
  const ExprPtr root = c.value(schema, "#");
  // The document itself may be referenced ("$ref": "#"), which made it a rule already.
  const int32_t self = g.find_rule("ref#");
  const int32_t id = self >= 0 ? self : g.add_rule("root", root);
  g.set_root(id);
  return g;
}

Grammar json_schema_grammar_from_text(std::string_view schema_text, const JsonSchemaOptions& options) {
  if (json_nests_deeper(schema_text, kMaxSchemaTextDepth))
    throw GrammarError("json_schema: the schema nests deeper than " + std::to_string(kMaxSchemaTextDepth) + " levels");
  OrderedJson schema;
  try {
    schema = OrderedJson::parse(schema_text);
  } catch (const nlohmann::json::exception& e) {
    throw GrammarError(std::string("json_schema: not JSON: ") + e.what());
  }
  return json_schema_grammar(schema, options);
}

Grammar json_object_grammar(const JsonSchemaOptions& options) {
  Grammar g;
  static const OrderedJson kAny = OrderedJson::object();
  JsonSchemaConverter c(g, kAny, options);
  c.any_value();
  g.set_root(g.add_rule("root", rule_ref(g.find_rule("json_any_object"))));
  return g;
}

}  // namespace ds::grammar
