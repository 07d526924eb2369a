// JSON Schema -> expressions (json_schema.h); oneOf's exclusivity check is
// json_schema_one_of.cpp.
#include "model/grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "model/grammar/json_schema_types.h"
#include "model/grammar/regex.h"
#include "model/grammar/utf8_class.h"
#include "model/tokenizer/utf8.h"

namespace ds::grammar {

using schema::fail;
using schema::inferred_types;

namespace {

const std::set<std::string>& annotations() {
  static const std::set<std::string> s = {
      "title",   "description", "default",         "examples",         "example",  "$schema",   "$id",
      "id",      "$comment",    "deprecated",      "readOnly",         "writeOnly", "contentEncoding",
      "$defs",   "definitions", "contentMediaType", "discriminator",   "$anchor"};
  return s;
}

const std::set<std::string>& unsupported() {
  static const std::set<std::string> s = {
      "multipleOf", "contains",        "minContains",      "maxContains",    "patternProperties",
      "propertyNames", "dependencies", "dependentRequired", "dependentSchemas", "if",
      "then",       "else",            "not",              "unevaluatedProperties", "unevaluatedItems",
      "$dynamicRef", "$recursiveRef"};
  return s;
}

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string dump(const OrderedJson& v) { return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string date_regex() {
  return "[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"
         "02-(?:0[1-9]|1[0-9]|2[0-8]))";
}
std::string time_regex() {
  return "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
}
std::string hostname_regex() {
  const std::string label = "[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?";
  return label + "(?:\\." + label + ")*";
}

}  // namespace

ExprPtr json_format_content(const std::string& f) {
  std::string re;
  if (f == "date") re = date_regex();
  else if (f == "time") re = time_regex();
  else if (f == "date-time") re = date_regex() + "T" + time_regex();
  else if (f == "uuid") re = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  else if (f == "email") re = "[a-zA-Z0-9_%+-]+(?:\\.[a-zA-Z0-9_%+-]+)*@" + hostname_regex() + "\\.[a-zA-Z]{2,10}";
  else if (f == "ipv4")
    re = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}";
  else if (f == "hostname") re = hostname_regex();
  else if (f == "uri") re = "[a-zA-Z][a-zA-Z0-9+.-]*://" + hostname_regex() + "(?:/[a-zA-Z0-9._~%!$&'()*+,;=:@-]*)*";
  else return nullptr;
  return regex_expr(re, RegexMode::whole_text);
}

namespace {

// Raw key content (no escapes) that spells none of `names`: a trie of the names, where each
// node may end (unless it is a name) or continue with a child or with any other character.
ExprPtr key_content_except(const std::vector<std::string>& names, bool lt_raw) {
  CodepointSet chars = CodepointSet::of(0x20, kMaxCodepoint);
  CodepointSet special;
  special.add('"');
  special.add('\\');
  if (!lt_raw) special.add('<');
  chars = chars.minus(special);
  struct Node {
    std::map<char32_t, size_t> kids;
    bool word = false;
  };
  std::vector<Node> nodes(1);
  for (const std::string& name : names) {
    // Decode; a name with a character a plain key cannot hold can never collide.
    std::vector<char32_t> cps;
    bool plain = true;
    for (size_t i = 0; i < name.size() && plain;) {
      char32_t cp = 0;
      const size_t n = tok::utf8::decode_one(name, i, cp);
      if (n == 0 || !chars.contains(cp)) plain = false;
      cps.push_back(cp);
      i += n ? n : 1;
    }
    if (!plain) continue;
    size_t u = 0;
    for (char32_t c : cps) {
      auto it = nodes[u].kids.find(c);
      if (it == nodes[u].kids.end()) {
        nodes.push_back({});
        it = nodes[u].kids.emplace(c, nodes.size() - 1).first;
      }
      u = it->second;
    }
    nodes[u].word = true;
  }
  const ExprPtr any = star(utf8_expr(chars));
  // Children before parents: build bottom-up by recursion on the (small) trie.
  std::function<ExprPtr(size_t)> build = [&](size_t u) -> ExprPtr {
    std::vector<ExprPtr> alts;
    if (!nodes[u].word) alts.push_back(empty());
    CodepointSet others = chars;
    for (const auto& [c, v] : nodes[u].kids) {
      std::string enc;
      tok::utf8::append(enc, c);
      alts.push_back(seq({bytes(enc), build(v)}));
      others = others.minus(CodepointSet::of(c, c));
    }
    alts.push_back(seq({utf8_expr(others), any}));
    return alt(std::move(alts));
  };
  return build(0);
}

struct DepthGuard {
  int& d;
  explicit DepthGuard(int& depth) : d(depth) {
    if (++d > 256) throw GrammarError("json_schema: the schema nests too deeply");
  }
  ~DepthGuard() { --d; }
};

}  // namespace

JsonSchemaConverter::JsonSchemaConverter(Grammar& grammar, const OrderedJson& document, JsonSchemaOptions options,
                                         std::string rule_prefix)
    : g_(grammar), doc_(document), options_(options), prefix_(std::move(rule_prefix)),
      ws_(json_ws(options.whitespace)) {}

namespace {
// A count keyword (minLength, maxItems, ...): -1 when absent.
int32_t count_keyword(const OrderedJson& s, const char* kw, const std::string& where) {
  if (!s.contains(kw)) return -1;
  const OrderedJson& v = s[kw];
  if (!v.is_number_integer() || v.get<int64_t>() < 0) fail(where, std::string("'") + kw + "' must be a count");
  if (v.get<int64_t>() > kMaxRepeat)
    fail(where, std::string("'") + kw + "' above " + std::to_string(kMaxRepeat) + " is not supported");
  return static_cast<int32_t>(v.get<int64_t>());
}
}  // namespace

ExprPtr JsonSchemaConverter::any_value() {
  int32_t obj = g_.find_rule("json_any_object");
  int32_t arr = g_.find_rule("json_any_array");
  const bool lt = !options_.escape_lt;
  auto value_of = [&](int32_t o, int32_t a) {
    return alt({rule_ref(o), rule_ref(a), json_string(0, -1, lt), json_number(), bytes("true"), bytes("false"),
                bytes("null")});
  };
  if (obj < 0) {
    obj = g_.add_rule("json_any_object");
    arr = g_.add_rule("json_any_array");
    const ExprPtr v = value_of(obj, arr);
    const ExprPtr sep = seq({ws_, bytes(","), ws_});
    const ExprPtr kv = seq({json_string(0, -1, lt), ws_, bytes(":"), ws_, v});
    g_.set_body(obj, seq({bytes("{"), ws_, optional(seq({kv, star(seq({sep, kv}))})), ws_, bytes("}")}));
    g_.set_body(arr, seq({bytes("["), ws_, optional(seq({v, star(seq({sep, v}))})), ws_, bytes("]")}));
  }
  return value_of(obj, arr);
}

const OrderedJson& JsonSchemaConverter::resolve(const std::string& pointer, const std::string& where) const {
  if (pointer.empty() || pointer[0] != '#')
    fail(where, "reference '" + pointer + "' is not local (only '#' and '#/...' references are supported)");
  if (pointer == "#") return doc_;
  if (pointer[1] != '/') fail(where, "reference '" + pointer + "' is not a JSON pointer");
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
    } else if (cur->is_array() && !tok.empty() && std::all_of(tok.begin(), tok.end(), ::isdigit) &&
               std::stoull(tok) < cur->size()) {
      cur = &(*cur)[std::stoull(tok)];
    } else {
      fail(where, "reference '" + pointer + "' does not resolve");
    }
    i = j + 1;
  }
  return *cur;
}

const OrderedJson& JsonSchemaConverter::deref(const OrderedJson& schema, const std::string& where) const {
  const OrderedJson* s = &schema;
  for (int hops = 0; s->is_object() && s->contains("$ref") && (*s)["$ref"].is_string(); ++hops) {
    if (hops > 64) fail(where, "reference chain too long");
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
  DepthGuard guard(depth_);
  if (s.is_boolean()) {
    if (s.get<bool>()) return any_value();
    fail(where, "the schema 'false' matches nothing");
  }
  if (!s.is_object()) fail(where, "a schema must be an object or a boolean");
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (!unsupported().count(k)) continue;
    fail(where, "'" + k + "' is not supported");
  }
  auto only_annotations_besides = [&](const std::string& keyword) {
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != keyword && !annotations().count(it.key()))
        fail(where, "'" + it.key() + "' beside '" + keyword + "' is not supported");
  };
  if (s.contains("$ref")) {
    only_annotations_besides("$ref");
    if (!s["$ref"].is_string()) fail(where, "'$ref' must be a string");
    return ref(s["$ref"].get<std::string>(), where);
  }
  if (s.contains("allOf")) {
    only_annotations_besides("allOf");
    const OrderedJson& all = s["allOf"];
    if (!all.is_array() || all.size() != 1) fail(where, "'allOf' is supported with exactly one schema");
    return value(all[0], where + "/allOf/0");
  }
  for (const char* kw : {"anyOf", "oneOf"}) {
    if (!s.contains(kw)) continue;
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != kw && it.key() != "nullable" && !annotations().count(it.key()))
        fail(where, "'" + it.key() + "' beside '" + kw + "' is not supported");
    const OrderedJson& all = s[kw];
    if (!all.is_array() || all.empty()) fail(where, std::string("'") + kw + "' must be a non-empty array");
    // A false alternative matches nothing: leaving it out changes neither anyOf nor oneOf.
    OrderedJson alts = OrderedJson::array();
    for (const OrderedJson& a : all)
      if (!(a.is_boolean() && !a.get<bool>())) alts.push_back(a);
    if (alts.empty()) fail(where, std::string("every alternative of '") + kw + "' is false");
    ExprPtr e;
    if (std::string(kw) == "oneOf") {
      e = one_of(alts, where);
    } else {
      std::vector<ExprPtr> items;
      for (size_t i = 0; i < alts.size(); ++i) items.push_back(value(alts[i], where + "/anyOf/" + std::to_string(i)));
      e = alt(std::move(items));
    }
    if (s.value("nullable", false)) e = alt({e, bytes("null")});
    return e;
  }
  if (s.contains("const")) return json_literal(dump(s["const"]), !options_.escape_lt);
  if (s.contains("enum")) {
    const OrderedJson& values = s["enum"];
    if (!values.is_array() || values.empty()) fail(where, "'enum' must be a non-empty array");
    std::vector<ExprPtr> items;
    for (const OrderedJson& v : values) items.push_back(json_literal(dump(v), !options_.escape_lt));
    return alt(std::move(items));
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    const OrderedJson& t = s["type"];
    if (t.is_string()) {
      types.push_back(t.get<std::string>());
    } else if (t.is_array() && !t.empty()) {
      for (const OrderedJson& x : t) {
        if (!x.is_string()) fail(where, "'type' must name types");
        types.push_back(x.get<std::string>());
      }
    } else {
      fail(where, "'type' must be a string or a non-empty array of strings");
    }
  } else {
    for (const std::string& t : inferred_types(s)) types.push_back(t);
    if (types.empty()) return s.value("nullable", false) ? alt({any_value(), bytes("null")}) : any_value();
  }
  if (s.value("nullable", false) && std::find(types.begin(), types.end(), "null") == types.end())
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
  if (type != "integer" && type != "number") fail(where, "unknown type '" + type + "'");
  const bool integer = type == "integer";
  NumberBounds b;
  bool bounded = false;
  auto number_at = [&](const char* kw) -> std::optional<double> {
    if (!s.contains(kw)) return std::nullopt;
    if (!s[kw].is_number()) fail(where, std::string("'") + kw + "' must be a number");
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
    if (!v.is_number()) fail(where, std::string("'") + kw + "' must be a number or a boolean");
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
    fail(where, e.what());
  }
}

ExprPtr JsonSchemaConverter::string(const OrderedJson& s, const std::string& where) {
  auto count_at = [&](const char* kw) { return count_keyword(s, kw, where); };
  const int32_t min_len = count_at("minLength");
  const int32_t max_len = count_at("maxLength");
  if (min_len >= 0 && max_len >= 0 && max_len < min_len) fail(where, "'maxLength' is below 'minLength'");
  const bool lengths = min_len >= 0 || max_len >= 0;
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) fail(where, "'pattern' must be a string");
    if (lengths) fail(where, "'pattern' together with 'minLength'/'maxLength' is not supported");
    try {
      return seq({bytes("\""),
                  regex_expr(s["pattern"].get<std::string>(), RegexMode::json_string_search, !options_.escape_lt),
                  bytes("\"")});
    } catch (const GrammarError& e) {
      fail(where + "/pattern", e.what());
    }
  }
  if (s.contains("format") && s["format"].is_string()) {
    if (ExprPtr f = json_format_content(s["format"].get<std::string>())) {
      if (lengths) fail(where, "'format' together with 'minLength'/'maxLength' is not supported");
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
    if (!s["prefixItems"].is_array()) fail(where, "'prefixItems' must be an array");
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
  if (max_items >= 0 && max_items < min_items) fail(where, "'maxItems' is below 'minItems'");
  if (s.value("uniqueItems", false) && !(max_items >= 0 && max_items <= 1))
    fail(where, "'uniqueItems' is not supported (unless maxItems <= 1)");
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
  if (!rest_allowed && min_items > k) fail(where, "'minItems' asks for more items than the schema allows");
  const ExprPtr sep = seq({ws_, bytes(","), ws_});
  ExprPtr rest_expr;
  if (rest_allowed) rest_expr = rest ? value(*rest, rest_where) : any_value();
  // tail: the items after the tuple, each after a separator.
  auto tail = [&](int32_t from) -> ExprPtr {
    if (!rest_expr) return empty();
    const int32_t lo = std::max(0, min_items - from);
    const int32_t hi = max_items < 0 ? -1 : max_items - from;
    if (hi == 0) return empty();
    return repeat(seq({sep, rest_expr}), lo, hi);
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
    const int32_t hi = max_items < 0 ? -1 : max_items - 1;
    ExprPtr first = seq({rest_expr, repeat(seq({sep, rest_expr}), std::max(0, min_items - 1), hi)});
    body = min_items > 0 ? first : optional(first);
  } else {
    body = empty();
  }
  return seq({bytes("["), ws_, body, ws_, bytes("]")});
}

ExprPtr JsonSchemaConverter::object(const OrderedJson& s, const std::string& where) {
  static const OrderedJson kEmpty = OrderedJson::object();
  const OrderedJson& props = s.contains("properties") ? s["properties"] : kEmpty;
  if (!props.is_object()) fail(where, "'properties' must be an object");
  std::vector<std::string> required;
  if (s.contains("required")) {
    const OrderedJson& r = s["required"];
    if (!r.is_array()) fail(where, "'required' must be an array");
    for (const OrderedJson& x : r) {
      if (!x.is_string()) fail(where, "'required' must list property names");
      if (std::find(required.begin(), required.end(), x.get<std::string>()) == required.end())
        required.push_back(x.get<std::string>());
    }
  }
  // What extra properties may hold: null = none.
  ExprPtr extra_value;
  if (s.contains("additionalProperties")) {
    const OrderedJson& a = s["additionalProperties"];
    if (!(a.is_boolean() && !a.get<bool>())) extra_value = value(a, where + "/additionalProperties");
  } else if (options_.additional_properties_default) {
    extra_value = any_value();
  }
  auto is_required = [&](const std::string& name) {
    return std::find(required.begin(), required.end(), name) != required.end();
  };
  std::vector<ExprPtr> members_list;
  std::vector<bool> flags;
  std::vector<std::string> names;
  auto member = [&](const std::string& name, ExprPtr v) {
    return seq({json_literal(dump(OrderedJson(name)), !options_.escape_lt), ws_, bytes(":"), ws_, std::move(v)});
  };
  for (auto it = props.begin(); it != props.end(); ++it) {
    const std::string& name = it.key();
    names.push_back(name);
    if (it.value().is_boolean() && !it.value().get<bool>()) {
      if (is_required(name)) fail(where, "required property '" + name + "' has the schema 'false'");
      continue;
    }
    members_list.push_back(member(name, value(it.value(), where + "/properties/" + pointer_token(name))));
    flags.push_back(is_required(name));
  }
  for (const std::string& name : required) {
    if (props.contains(name)) continue;
    if (!extra_value)
      fail(where, "required property '" + name + "' is not in 'properties' and additional properties are not allowed");
    names.push_back(name);
    members_list.push_back(member(name, extra_value));
    flags.push_back(true);
  }
  const size_t n_required = required.size();
  if (s.contains("minProperties")) {
    const OrderedJson& v = s["minProperties"];
    if (!v.is_number_integer() || v.get<int64_t>() > static_cast<int64_t>(n_required))
      fail(where, "'minProperties' beyond the required properties is not supported");
  }
  if (s.contains("maxProperties")) {
    const OrderedJson& v = s["maxProperties"];
    if (!v.is_number_integer() || extra_value || v.get<int64_t>() < static_cast<int64_t>(members_list.size()))
      fail(where, "'maxProperties' below the number of possible properties is not supported");
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
