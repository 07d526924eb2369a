// Structured outputs: what a request asks its output to be, and the compiled grammar that
// makes it so (model/grammar/; the engine samples under its token masks).
//
// Read from (at most one of them):
//  * response_format: {"type": "text"} (nothing), {"type": "json_object"}, or
//    {"type": "json_schema", "json_schema": {"name", "schema", "strict", "description"}};
//  * vLLM's structured_outputs: {"json": SCHEMA (object or JSON text), "regex": "...",
//    "choice": ["a", "b"], "grammar": "GBNF text", "json_object": true}, with
//    "disable_any_whitespace": true for compact JSON;
//  * vLLM's older guided_json, guided_regex, guided_choice, guided_grammar
//    (guided_decoding_backend is ignored: there is one engine).
// JSON outputs follow json_schema.h (the schema subset, bounded whitespace); regex and choice
// constrain the whole output; a grammar is GBNF (ebnf.h) with a rule named root.
// Anything malformed, unsupported or too large is a 400 naming the field and what is wrong.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/grammar/compiler.h"
#include "server/grammar_cache.h"
#include "server/json.h"

namespace ds::server {

struct OutputConstraint {
  enum class Kind { none, json_object, json_schema, regex, choice, grammar };
  Kind kind = Kind::none;
  Json schema;                       // json_schema
  std::string text;                  // regex, grammar
  std::vector<std::string> choices;  // choice
  bool compact_json = false;         // no whitespace between JSON tokens
  std::string param;                 // the request field it came from (for errors)
};

// Throws ApiError 400 for malformed fields, or for more than one constraint.
OutputConstraint parse_output_constraint(const Json& body);

// The compiled grammar (from the cache when the same constraint was compiled before); null
// for Kind::none. optional_reasoning: the model may first write a <think>...</think> block,
// unconstrained (with_optional_reasoning). `gone` says the client left (grammar_cache.h).
// Throws ApiError: 400 naming the field when the constraint cannot be compiled (what is wrong,
// or which limit it reached and why), 503 when too many compiles wait, 499 when the client
// left while it compiled.
std::shared_ptr<const grammar::CompiledGrammar> compile_output_constraint(const OutputConstraint& c,
                                                                          GrammarCache& cache,
                                                                          bool optional_reasoning = false,
                                                                          const GrammarCache::Gone& gone = {});

// Runs a GrammarCache lookup, turning its failures into ApiErrors: GrammarError -> 400 with
// `prefix` and the field `param`, GrammarBusy -> 503, CompileCancelled -> 499.
std::shared_ptr<const grammar::CompiledGrammar> cached_grammar(GrammarCache& cache, const std::string& key,
                                                               GrammarCache::Build build, const GrammarCache::Gone& gone,
                                                               const std::string& prefix, const std::string& param);

// `g` preceded by an optional reasoning block: "<think>", any text, "</think>", up to two
// line breaks. For a chat whose prompt leaves reasoning to the model, so that the constraint
// applies after </think> only, or from the first token when the model does not reason.
grammar::Grammar with_optional_reasoning(grammar::Grammar g);

}  // namespace ds::server
