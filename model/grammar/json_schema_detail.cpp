// The JSON Schema converter's shared pieces (json_schema_detail.h).
#include "model/grammar/json_schema_detail.h"

#include <map>

namespace ds::grammar::detail {

const std::set<std::string>& schema_annotations() {
  static const std::set<std::string> s = {
      "title",   "description", "default",         "examples",         "example",  "$schema",   "$id",
      "id",      "$comment",    "deprecated",      "readOnly",         "writeOnly", "contentEncoding",
      "$defs",   "definitions", "contentMediaType", "discriminator",   "$anchor"};
  return s;
}

const std::set<std::string>& unsupported_keywords() {
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

std::string json_text_of(const OrderedJson& v) { return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

const TypeSet& all_types() {
  static const TypeSet s = {"null", "boolean", "number", "string", "array", "object"};
  return s;
}

std::string json_type_of(const OrderedJson& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

TypeSet inferred_types(const OrderedJson& s) {
  static const std::map<std::string, std::string> keyword_type = {
      {"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"},
      {"minProperties", "object"}, {"maxProperties", "object"}, {"items", "array"},
      {"prefixItems", "array"}, {"additionalItems", "array"}, {"minItems", "array"},
      {"maxItems", "array"}, {"uniqueItems", "array"}, {"pattern", "string"},
      {"minLength", "string"}, {"maxLength", "string"}, {"format", "string"},
      {"minimum", "number"}, {"maximum", "number"}, {"exclusiveMinimum", "number"},
      {"exclusiveMaximum", "number"}};
  TypeSet out;
  for (auto it = s.begin(); it != s.end(); ++it) {
    auto k = keyword_type.find(it.key());
    if (k != keyword_type.end()) out.insert(k->second);
  }
  return out;
}

void schema_fail(const std::string& where, const std::string& what) {
  throw GrammarError("json_schema: " + (where.empty() ? std::string("#") : where) + ": " + what);
}

int32_t count_keyword(const OrderedJson& s, const char* kw, const std::string& where) {
  if (!s.contains(kw)) return -1;
  const OrderedJson& v = s[kw];
  if (!v.is_number_integer() || v.get<int64_t>() < 0) schema_fail(where, std::string("'") + kw + "' must be a count");
  if (v.get<int64_t>() > kMaxRepeat)
    schema_fail(where, std::string("'") + kw + "' above " + std::to_string(kMaxRepeat) + " is not supported");
  return static_cast<int32_t>(v.get<int64_t>());
}

}  // namespace ds::grammar::detail
