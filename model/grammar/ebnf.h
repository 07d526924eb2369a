// The text form of a grammar: GBNF as llama.cpp writes it, which is also what vLLM's
// `guided_grammar` / `structured_outputs.grammar` carry for xgrammar.
//
//   root   ::= object
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"      # comments run to the line's end
//   pair   ::= string ":" ws value
//   name   ::= [a-zA-Z_] [a-zA-Z0-9_]{0,31}
//   ws     ::= [ \t\n]*
//
// Literals in double or single quotes; classes [a-z], negated [^"\\]; `.` is any character;
// grouping ( ); postfix * + ? {n} {n,} {n,m}; alternatives |. Escapes: \n \r \t \\ \" \'
// \[ \] \- \xHH \uHHHH \UHHHHHHHH (code points). Text is UTF-8 and characters are code points
// (compiled to their UTF-8 bytes). A rule may span lines: it ends where the next `name ::=`
// begins. Rules may refer to rules defined later and to themselves (not left-recursively).
#pragma once

#include <string>
#include <string_view>

#include "model/grammar/grammar.h"

namespace ds::grammar {

// Throws GrammarError naming the line and column, or an undefined rule. The root is the rule
// named `root_rule`.
Grammar parse_ebnf(std::string_view text, std::string_view root_rule = "root");

}  // namespace ds::grammar
