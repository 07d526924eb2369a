// oneOf (json_schema.h): a grammar can only express it when no value matches two of its
// alternatives, so the alternatives are checked pairwise for exclusiveness (by type, by const
// or enum values, or by object properties one requires and the other forbids) and then joined
// as anyOf. What each alternative offers the check is computed once, so the pairwise pass
// costs little per pair; the number of alternatives and the depth of the check are bounded.
#include <algorithm>
#include <iterator>

#include "model/grammar/json_schema_detail.h"

namespace ds::grammar {

using namespace detail;

namespace {

constexpr size_t kMaxOneOf = 1024;
constexpr int kMaxCheckDepth = 8;
// Steps (property lookups, value comparisons) the whole check may take.
constexpr size_t kMaxCheckWork = size_t{20} << 20;

}  // namespace

ExprPtr JsonSchemaConverter::one_of(const OrderedJson& alts, const std::string& where) {
  if (alts.size() > kMaxOneOf)
    schema_fail(where, "'oneOf' with more than " + std::to_string(kMaxOneOf) +
                           " alternatives is not supported (use 'anyOf' when they cannot both match)");
  size_t work = 0;
  auto spend = [&](size_t steps) {
    work += steps;
    if (work > kMaxCheckWork)
      schema_fail(where, "'oneOf' is too large to check that its alternatives cannot both match (use 'anyOf')");
  };
  // The types an alternative's values can have. Depth-bounded: references may form cycles.
  auto types_of = [&](const OrderedJson& raw, int depth, auto&& self) -> TypeSet {
    if (depth > kMaxCheckDepth) return all_types();
    spend(1);
    const OrderedJson& x = deref(raw, where);
    if (x.is_boolean()) return x.get<bool>() ? all_types() : TypeSet{};
    if (!x.is_object()) return all_types();
    if (x.contains("const")) return {json_type_of(x["const"])};
    if (x.contains("enum") && x["enum"].is_array()) {
      TypeSet t;
      for (const OrderedJson& v : x["enum"]) t.insert(json_type_of(v));
      return t;
    }
    for (const char* kw : {"anyOf", "oneOf"}) {
      if (!x.contains(kw) || !x[kw].is_array()) continue;
      TypeSet t;
      for (const OrderedJson& a : x[kw]) {
        TypeSet u = self(a, depth + 1, self);
        t.insert(u.begin(), u.end());
      }
      return t;
    }
    TypeSet t;
    if (x.contains("type")) {
      const OrderedJson& ty = x["type"];
      auto add = [&](const std::string& n) { t.insert(n == "integer" ? "number" : n); };
      if (ty.is_string()) add(ty.get<std::string>());
      if (ty.is_array())
        for (const OrderedJson& y : ty)
          if (y.is_string()) add(y.get<std::string>());
    } else {
      t = inferred_types(x);
      if (t.empty()) return all_types();
    }
    const auto nullable = x.find("nullable");
    if (nullable != x.end() && nullable->is_boolean() && nullable->get<bool>()) t.insert("null");
    return t;
  };
  struct Alt {
    const OrderedJson* schema;
    TypeSet types;
    bool has_values = false;
    std::vector<const OrderedJson*> values;  // const or enum
    std::vector<std::string> required;
  };
  auto describe = [&](const OrderedJson& raw, int depth) {
    Alt a;
    a.schema = &deref(raw, where);
    a.types = types_of(raw, depth, types_of);
    const OrderedJson& x = *a.schema;
    if (!x.is_object()) return a;
    if (x.contains("const")) {
      a.has_values = true;
      a.values.push_back(&x["const"]);
    } else if (x.contains("enum") && x["enum"].is_array()) {
      a.has_values = true;
      for (const OrderedJson& v : x["enum"]) a.values.push_back(&v);
    }
    if (x.contains("required") && x["required"].is_array())
      for (const OrderedJson& r : x["required"])
        if (r.is_string()) a.required.push_back(r.get<std::string>());
    std::sort(a.required.begin(), a.required.end());
    return a;
  };
  // Whether the object schema `o` forbids property p.
  auto forbids = [&](const OrderedJson& o, const std::string& p) {
    spend(1 + (o.contains("properties") ? o["properties"].size() : 0));
    if (o.contains("properties") && o["properties"].is_object() && o["properties"].contains(p)) {
      const OrderedJson& ps = o["properties"][p];
      return ps.is_boolean() && !ps.get<bool>();
    }
    return o.contains("additionalProperties") && o["additionalProperties"].is_boolean() &&
           !o["additionalProperties"].get<bool>();
  };
  auto disjoint = [&](const Alt& a, const Alt& b, int depth, auto&& self) -> bool {
    if (depth > kMaxCheckDepth) return false;
    TypeSet common;
    std::set_intersection(a.types.begin(), a.types.end(), b.types.begin(), b.types.end(),
                          std::inserter(common, common.begin()));
    if (common.empty()) return true;
    if (!a.schema->is_object() || !b.schema->is_object()) return false;
    if (a.has_values && b.has_values) {
      spend(a.values.size() * b.values.size());
      for (const OrderedJson* x : a.values)
        for (const OrderedJson* y : b.values)
          if (*x == *y) return false;
      return true;
    }
    if (common != TypeSet{"object"}) return false;
    for (const std::string& p : a.required)
      if (forbids(*b.schema, p)) return true;
    for (const std::string& p : b.required)
      if (forbids(*a.schema, p)) return true;
    const OrderedJson& pa = a.schema->contains("properties") ? (*a.schema)["properties"] : OrderedJson();
    const OrderedJson& pb = b.schema->contains("properties") ? (*b.schema)["properties"] : OrderedJson();
    if (!pa.is_object() || !pb.is_object()) return false;
    for (const std::string& p : a.required) {
      spend(1 + pa.size() + pb.size());
      if (!std::binary_search(b.required.begin(), b.required.end(), p)) continue;
      if (pa.contains(p) && pb.contains(p) &&
          self(describe(pa[p], depth + 1), describe(pb[p], depth + 1), depth + 1, self))
        return true;
    }
    return false;
  };
  std::vector<Alt> described;
  described.reserve(alts.size());
  for (const OrderedJson& a : alts) described.push_back(describe(a, 0));
  std::vector<ExprPtr> items;
  for (size_t i = 0; i < alts.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (spend(1), !disjoint(described[j], described[i], 0, disjoint))
        schema_fail(where, "'oneOf' alternatives " + std::to_string(j) + " and " + std::to_string(i) +
                               " may both match (not supported: use 'anyOf', or make them exclusive by type, const or "
                               "required properties)");
    items.push_back(value(alts[i], where + "/oneOf/" + std::to_string(i)));
  }
  return alt(std::move(items));
}

}  // namespace ds::grammar
