// Parser for the Jinja subset: tokens (lexer.h) to a syntax tree (ast.h), following jinja2's
// grammar and operator precedence:
//   cond-expr:  or-expr [if or-expr [else cond-expr]]
//   or / and / not / comparisons (==, !=, <, <=, >, >=, in, not in; chained)
//   + -  then  ~  then  * / // %  then  **  then unary - +
//   postfix: .name  [index]  [a:b:c]  (call)  then filters |f(args) and tests `is [not] t`
//   primary: literals (str, int, float, true/false/none in either case), names, (tuples),
//            [lists], {dicts}
// Statements: if/elif/else, for (tuple targets, `if` filter, else), set (names, tuples,
// namespace attributes, block form), macro, call, filter, with, break/continue, raw (in the
// lexer), generation (HF's marker; rendered as a plain block). include/extends/import and
// other tags are syntax errors.
//
// Errors are TemplateSyntaxError with "NAME:LINE:COLUMN: message" pointing at the offending
// token. Nesting of expressions and blocks is limited (kMaxNesting, kMaxExprDepth) so a
// hostile template cannot exhaust the stack when it is parsed, rendered or destroyed.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "model/chat/ast.h"
#include "model/chat/lexer.h"

namespace ds::chat {

inline constexpr int kMaxNesting = 128;    // recursive constructs: brackets, blocks, not, -
inline constexpr int kMaxExprDepth = 512;  // height of any expression tree

struct ParsedTemplate {
  std::shared_ptr<const SourceMap> map;
  Body body;
};

ParsedTemplate parse_template(std::string_view source, const std::string& name);

}  // namespace ds::chat
