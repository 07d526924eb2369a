// The grammar of a chat reply whose tool_choice forces a call ("required", or a named
// function): nothing but Qwen3.5's XML tool calls (tool_call_parser.h) of the request's tools,
//
//   <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//
// one call (a named function, or parallel_tool_calls false) or several separated by a newline.
// Parameters come in the schema's order, required ones always; each VALUE is written as the
// parser reads it back (tool_parameter_type): a string parameter as raw text (its enum, const,
// format, pattern or length when the schema gives one; otherwise any text without a closing
// tag), any other type as JSON of the parameter's schema (json_schema.h) whose strings never
// hold a raw '<'. A parameter without a type stays raw text, as the parser keeps it a string.
#pragma once

#include <string>

#include "model/grammar/budget.h"
#include "model/grammar/grammar.h"
#include "server/json.h"

namespace ds::server {

// tools: the request's validated `tools`; function: the forced function's name, or "" for any.
// Throws grammar::GrammarError naming the tool and parameter whose schema is unsupported.
// budget: the compile's, drawn on while the schemas' patterns are read (budget.h).
grammar::Grammar tool_call_grammar(const Json& tools, const std::string& function, bool parallel,
                                   const grammar::CompileBudget* budget = nullptr);

}  // namespace ds::server
