// The JSON types of schemas and values (json_schema_types.h).
#include "model/grammar/json_schema_types.h"

#include <map>

namespace ds::grammar::schema {

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
void fail(const std::string& where, const std::string& what) {
  throw GrammarError("json_schema: " + (where.empty() ? std::string("#") : where) + ": " + what);
}

}  // namespace ds::grammar::schema
