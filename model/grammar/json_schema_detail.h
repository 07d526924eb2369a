// Pieces shared by the JSON Schema converter's files (json_schema.h): the keyword tables, the
// error form, type inference and the key expression of additionalProperties. Private to
// json_schema*.cpp.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "model/grammar/json_schema.h"

namespace ds::grammar::detail {

// Keywords that only annotate (ignored), and assertion keywords a grammar cannot express
// (refused by name).
const std::set<std::string>& schema_annotations();
const std::set<std::string>& unsupported_keywords();

// A property name as one JSON pointer segment (~ and / escaped).
std::string pointer_token(const std::string& key);
// Compact JSON text of a value (invalid UTF-8 replaced).
std::string json_text_of(const OrderedJson& v);

// The JSON types a schema's values can have: null, boolean, number (integer included),
// string, array, object.
using TypeSet = std::set<std::string>;
const TypeSet& all_types();
std::string json_type_of(const OrderedJson& v);
// The types a schema without "type" constrains, from its keywords (empty: any).
TypeSet inferred_types(const OrderedJson& s);

// Throws the GrammarError of a schema problem at `where` (a JSON pointer).
[[noreturn]] void schema_fail(const std::string& where, const std::string& what);
// A count keyword (minLength, maxItems, ...): -1 when absent.
int32_t count_keyword(const OrderedJson& s, const char* kw, const std::string& where);

// Raw key content (no escapes) that spells none of `names`.
ExprPtr key_content_except(const std::vector<std::string>& names, bool lt_raw);

}  // namespace ds::grammar::detail
