// oneOf (json_schema.h): an alternation whose alternatives must be exclusive, or a value from
// one could match another and fail oneOf; alternatives that may overlap are refused.
#include <algorithm>
#include <functional>
#include <iterator>
#include <set>

#include "model/grammar/json_schema.h"
#include "model/grammar/json_schema_types.h"

namespace ds::grammar {

using schema::all_types;
using schema::fail;
using schema::inferred_types;
using schema::json_type_of;
using schema::TypeSet;

ExprPtr JsonSchemaConverter::one_of(const OrderedJson& alts, const std::string& where) {
  // Alternatives must be exclusive, or a value from one could match another and fail oneOf.
  std::function<TypeSet(const OrderedJson&)> types_of = [&](const OrderedJson& raw) -> TypeSet {
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
        TypeSet u = types_of(a);
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
    if (x.value("nullable", false)) t.insert("null");
    return t;
  };
  auto values_of = [&](const OrderedJson& x, std::vector<OrderedJson>& out) {
    if (x.contains("const")) {
      out.push_back(x["const"]);
      return true;
    }
    if (x.contains("enum") && x["enum"].is_array()) {
      for (const OrderedJson& v : x["enum"]) out.push_back(v);
      return true;
    }
    return false;
  };
  std::function<bool(const OrderedJson&, const OrderedJson&, int)> disjoint = [&](const OrderedJson& ra,
                                                                                  const OrderedJson& rb,
                                                                                  int depth) -> bool {
    if (depth > 8) return false;
    const OrderedJson& a = deref(ra, where);
    const OrderedJson& b = deref(rb, where);
    const TypeSet ta = types_of(a), tb = types_of(b);
    TypeSet common;
    std::set_intersection(ta.begin(), ta.end(), tb.begin(), tb.end(), std::inserter(common, common.begin()));
    if (common.empty()) return true;
    if (!a.is_object() || !b.is_object()) return false;
    std::vector<OrderedJson> va, vb;
    if (values_of(a, va) && values_of(b, vb)) {
      for (const OrderedJson& x : va)
        for (const OrderedJson& y : vb)
          if (x == y) return false;
      return true;
    }
    if (common != TypeSet{"object"}) return false;
    auto forbids = [](const OrderedJson& o, const std::string& p) {
      if (o.contains("properties") && o["properties"].contains(p)) {
        const OrderedJson& ps = o["properties"][p];
        return ps.is_boolean() && !ps.get<bool>();
      }
      return o.contains("additionalProperties") && o["additionalProperties"].is_boolean() &&
             !o["additionalProperties"].get<bool>();
    };
    auto required_of = [](const OrderedJson& o) {
      std::vector<std::string> r;
      if (o.contains("required") && o["required"].is_array())
        for (const OrderedJson& x : o["required"])
          if (x.is_string()) r.push_back(x.get<std::string>());
      return r;
    };
    const auto ra_req = required_of(a), rb_req = required_of(b);
    for (const std::string& p : ra_req)
      if (forbids(b, p)) return true;
    for (const std::string& p : rb_req)
      if (forbids(a, p)) return true;
    for (const std::string& p : ra_req) {
      if (std::find(rb_req.begin(), rb_req.end(), p) == rb_req.end()) continue;
      if (a.contains("properties") && b.contains("properties") && a["properties"].contains(p) &&
          b["properties"].contains(p) && disjoint(a["properties"][p], b["properties"][p], depth + 1))
        return true;
    }
    return false;
  };
  std::vector<ExprPtr> items;
  for (size_t i = 0; i < alts.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (!disjoint(alts[j], alts[i], 0))
        fail(where, "'oneOf' alternatives " + std::to_string(j) + " and " + std::to_string(i) +
                        " may both match (not supported: use 'anyOf', or make them exclusive by type, const or "
                        "required properties)");
    items.push_back(value(alts[i], where + "/oneOf/" + std::to_string(i)));
  }
  return alt(std::move(items));
}
}  // namespace ds::grammar
