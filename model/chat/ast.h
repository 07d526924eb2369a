// Syntax tree of a parsed template: expressions (Expr) and statements (Stmt), each with the
// byte offset of its first token for error messages. Built by parser.cpp, walked by
// interpreter.cpp; immutable once built, so one tree serves concurrent renders.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/chat/value.h"

namespace ds::chat {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  kLiteral,   // value
  kName,      // name
  kList,      // items
  kTuple,     // items
  kDict,      // pairs
  kGetAttr,   // object . name
  kGetItem,   // object [ index ]
  kSlice,     // object [ start : stop : step ]
  kCall,      // object ( args )
  kFilter,    // object | name ( args ); object is null in a {% filter %} block
  kTest,      // object is name ( args )
  kNot,       // not object
  kNeg,       // - object
  kPos,       // + object
  kBinary,    // lhs op rhs (arithmetic, ~)
  kAnd,       // lhs and rhs
  kOr,        // lhs or rhs
  kCompare,   // object op1 e1 op2 e2 ... (chained)
  kCondExpr,  // then if cond else otherwise
};

struct Arguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct Expr {
  ExprKind kind;
  std::size_t offset;
  int depth = 1;           // height of the tree below (parser.cpp keeps it bounded)
  std::string name;        // kName, kGetAttr, kFilter, kTest; operator of kBinary
  Value value;             // kLiteral
  ExprPtr object;          // operand / callee / filtered value
  ExprPtr index;           // kGetItem index; kBinary/kAnd/kOr rhs; kCondExpr condition
  ExprPtr lhs;             // kBinary/kAnd/kOr lhs; kCondExpr "then"
  ExprPtr otherwise;       // kCondExpr "else" (may be null)
  ExprPtr start, stop, step;  // kSlice parts (each may be null)
  std::vector<ExprPtr> items;                               // kList, kTuple
  std::vector<std::pair<ExprPtr, ExprPtr>> pairs;           // kDict
  std::vector<std::pair<std::string, ExprPtr>> comparisons; // kCompare: (op, operand)
  Arguments args;          // kCall, kFilter, kTest

  Expr(ExprKind k, std::size_t off) : kind(k), offset(off) {}
};

enum class StmtKind {
  kText,        // text
  kOutput,      // {{ expr }}
  kIf,          // branches (cond, body); else_body
  kFor,         // targets in iter [if filter] body [else else_body]
  kSet,         // targets = expr  |  ns.attr = expr
  kSetBlock,    // {% set x %}body{% endset %}, optional filter
  kMacro,       // name(params) body
  kCallBlock,   // {% call(params) expr %}body
  kFilterBlock, // {% filter f %}body
  kWith,        // {% with a = 1 %}body
  kBreak,
  kContinue,
  kBlock,       // a plain body ({% generation %})
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  StmtKind kind;
  std::size_t offset;
  std::string text;                                 // kText
  ExprPtr expr;                                     // kOutput, kSet, kCallBlock call, filters
  ExprPtr iter;                                     // kFor
  ExprPtr filter;                                   // kFor loop filter
  std::vector<std::string> targets;                 // kFor / kSet names (tuple if > 1)
  bool target_is_tuple = false;
  std::string attribute;                            // kSet on a namespace: targets[0].attribute
  std::vector<std::pair<ExprPtr, Body>> branches;   // kIf
  Body body;
  Body else_body;
  std::string name;                                 // kMacro
  std::vector<MacroParam> params;                   // kMacro, kCallBlock caller params
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;  // kMacro
  std::vector<std::pair<std::string, ExprPtr>> assignments;  // kWith

  Stmt(StmtKind k, std::size_t off) : kind(k), offset(off) {}
};

}  // namespace ds::chat
