// What the JSON Schema converter's files share (json_schema.cpp, json_schema_one_of.cpp): the
// JSON types a schema's values can have and the error every refusal raises. Internal to
// model/grammar.
#pragma once

#include <set>
#include <string>

#include "model/grammar/json_schema.h"

namespace ds::grammar::schema {

// The JSON types a schema's values can have: null, boolean, number (integer included),
// string, array, object.
using TypeSet = std::set<std::string>;

const TypeSet& all_types();
// The type of a JSON value (a const or an enum member).
std::string json_type_of(const OrderedJson& v);
// The types a schema without "type" implies by its keywords (properties: object, items:
// array, ...); empty when it names none.
TypeSet inferred_types(const OrderedJson& s);

// Throws GrammarError "json_schema: WHERE: WHAT" (WHERE is the JSON pointer, "#" when empty).
[[noreturn]] void fail(const std::string& where, const std::string& what);

}  // namespace ds::grammar::schema
