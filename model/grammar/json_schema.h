// JSON Schema -> Grammar: the text of JSON values a schema accepts.
//
// Supported (what OpenAI's strict mode allows, plus what JSON-Schema-Test-Suite exercises that
// a grammar can express): type (one or a list; inferred from the keywords when absent),
// properties (written in the schema's order), required, additionalProperties, items,
// prefixItems, items as a list + additionalItems (draft 4-7 tuples), minItems, maxItems,
// enum, const, anyOf, oneOf (when its alternatives cannot both match), allOf of one schema,
// $ref to "#" or a JSON pointer into the document ($defs, definitions, ...; recursion
// allowed), pattern (regex.h, searched as the spec says unless anchored), format (date, time,
// date-time, uuid, email, ipv4, hostname, uri; other formats are annotations), minLength,
// maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum (integers exactly; numbers
// conservatively, see json_number_range), nullable (OpenAPI). Annotations (title,
// description, default, examples, ...) and unknown keywords are ignored.
//
// Refused with GrammarError naming the keyword and where it is (what a 400 reports):
// multipleOf, uniqueItems, contains, patternProperties, propertyNames, dependencies,
// if/then/else, not, allOf of several schemas, oneOf whose alternatives overlap, assertions
// beside $ref, remote references, minProperties/maxProperties beyond what required and
// properties already imply, pattern together with minLength/maxLength, false schemas.
//
// Generation choices (every output still validates): an object without additionalProperties
// gets only its declared properties (as OpenAI's strict mode; JsonSchemaOptions can follow
// the spec's default instead); extra properties, where allowed, have plain keys different from
// the declared ones; whitespace between tokens is bounded (json_text.h).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "model/grammar/budget.h"
#include "model/grammar/grammar.h"
#include "model/grammar/json_text.h"

namespace ds::grammar {

using OrderedJson = nlohmann::ordered_json;

struct JsonSchemaOptions {
  JsonWhitespace whitespace;
  // What an object schema without additionalProperties allows: false = no extra properties
  // (strict mode's rule), true = any (the spec's default).
  bool additional_properties_default = false;
  // Write '<' in strings only as \u003c (json_chars), for JSON inside XML-like tool calls.
  bool escape_lt = false;
  // The compile's budget (budget.h), drawn on while patterns are read; none: unbounded in time.
  const CompileBudget* budget = nullptr;
};

// The characters (no quotes) of a string in a known `format` (date, time, date-time, uuid,
// email, ipv4, hostname, uri: ASCII, nothing to escape); null for other formats.
ExprPtr json_format_content(const std::string& format);

// A grammar whose root is one JSON value valid under `schema`.
Grammar json_schema_grammar(const OrderedJson& schema, const JsonSchemaOptions& options = {});
// The same from text (GrammarError for text that is not JSON, or nested deeper than
// kMaxSchemaTextDepth).
inline constexpr int kMaxSchemaTextDepth = 128;
Grammar json_schema_grammar_from_text(std::string_view schema_text, const JsonSchemaOptions& options = {});
// Any JSON object (response_format json_object).
Grammar json_object_grammar(const JsonSchemaOptions& options = {});

// Builds expressions for values of one schema document inside a grammar under construction
// (several documents may share a grammar: a tool-call grammar has one per tool). Rules it
// adds: one per $ref target, and the shared recursive rules of "any JSON value".
class JsonSchemaConverter {
 public:
  JsonSchemaConverter(Grammar& grammar, const OrderedJson& document, JsonSchemaOptions options,
                      std::string rule_prefix = "");
  // An expression for the values valid under `schema` (a part of the document); `where` is
  // its JSON pointer, for messages. Throws GrammarError (only).
  ExprPtr value(const OrderedJson& schema, const std::string& where);
  // Any JSON value (its object and array rules are shared by the whole grammar).
  ExprPtr any_value();
  const JsonSchemaOptions& options() const { return options_; }

 private:
  ExprPtr schema_value(const OrderedJson& schema, const std::string& where);
  // value() as a rule of its own, which the compiler inlines or calls (rule_plan.h): for
  // values a counted repetition copies (array items, additional properties).
  ExprPtr shared_value(const OrderedJson& schema, const std::string& where);
  ExprPtr typed(const OrderedJson& schema, const std::string& type, const std::string& where);
  ExprPtr object(const OrderedJson& schema, const std::string& where);
  ExprPtr array(const OrderedJson& schema, const std::string& where);
  ExprPtr string(const OrderedJson& schema, const std::string& where);
  ExprPtr ref(const std::string& pointer, const std::string& where);
  ExprPtr one_of(const OrderedJson& alts, const std::string& where);
  const OrderedJson& resolve(const std::string& pointer, const std::string& where) const;
  const OrderedJson& deref(const OrderedJson& schema, const std::string& where) const;

  Grammar& g_;
  const OrderedJson& doc_;
  JsonSchemaOptions options_;
  std::string prefix_;
  ExprPtr ws_;
  std::unordered_map<std::string, int32_t> ref_rules_;
  int32_t any_object_ = -1, any_array_ = -1;  // the grammar's json_any_* rules, once looked up
  int depth_ = 0;
};

}  // namespace ds::grammar
