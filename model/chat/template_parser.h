// The template parser (parser.h) as a class: its token cursor and the parse functions,
// statements in parser.cpp, expressions in parser_expressions.cpp. Internal to model/chat.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/chat/lexer.h"
#include "model/chat/parser.h"

namespace ds::chat::detail {

// How a token is named in syntax errors.
std::string describe(const Token& t);

class Parser {
 public:
  explicit Parser(LexedTemplate lexed) : map_(std::move(lexed.map)), toks_(std::move(lexed.tokens)) {}

  ParsedTemplate run() {
    ParsedTemplate out;
    out.body = parse_body({}, "", 0);
    out.map = map_;
    return out;
  }

 private:
  std::shared_ptr<const SourceMap> map_;
  std::vector<Token> toks_;
  std::size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string> names_seen_;

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting)
        p.fail(p.cur().offset, "template nested too deeply (more than " +
                                   std::to_string(kMaxNesting) + " levels)");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return toks_[i_]; }
  const Token& peek(std::size_t k = 1) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }
  bool is_op(std::string_view op) const {
    return cur().type == TokenType::kOperator && cur().value == op;
  }
  bool is_name(std::string_view n) const {
    return cur().type == TokenType::kName && cur().value == n;
  }
  [[noreturn]] void fail(std::size_t offset, const std::string& message) const {
    map_->syntax_error(offset, message);
  }
  void expect_op(std::string_view op) {
    if (!is_op(op)) fail(cur().offset, "expected '" + std::string(op) + "', got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != TokenType::kName) fail(cur().offset, "expected a name, got " + describe(cur()));
    return next().value;
  }
  void expect_block_end() {
    if (cur().type != TokenType::kBlockEnd)
      fail(cur().offset, "expected end of statement block, got " + describe(cur()));
    next();
  }

  // ---- statements ----

  // Parses until a block tag named in `end_tags`; returns with that name as the current token.
  Body parse_body(std::initializer_list<std::string_view> end_tags, std::string_view opener,
                  std::size_t opener_offset);

  StmtPtr parse_statement();

  StmtPtr parse_if();

  // Names (optionally a parenthesised or bare tuple of names) being assigned.
  void parse_targets(Stmt& s);

  StmtPtr parse_for();

  StmtPtr parse_set();

  void parse_signature(std::vector<MacroParam>& params);

  void scan_special_names(Stmt& s, std::size_t mark);

  StmtPtr parse_macro();

  StmtPtr parse_call_block();

  StmtPtr parse_filter_block();

  StmtPtr parse_with();

  StmtPtr parse_plain_block(const char* name, std::string_view end);

  // ---- expressions ----

  ExprPtr make(ExprKind k, std::size_t offset) { return std::make_unique<Expr>(k, offset); }

  // Sets e.depth from its (finished) children and refuses trees too deep to walk safely: long
  // chains such as a|f|f|f... or a+b+c+... are left-deep trees, which the depth guard on
  // recursive parsing alone does not bound.
  ExprPtr sealed(ExprPtr e);

  ExprPtr binary(ExprKind k, std::string op, ExprPtr l, ExprPtr r, std::size_t offset);

  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const;

  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                      bool explicit_parentheses);

  ExprPtr parse_expression(bool with_condexpr);

  ExprPtr parse_condexpr();

  ExprPtr parse_or();

  ExprPtr parse_and();

  ExprPtr parse_not();

  ExprPtr parse_compare();

  ExprPtr parse_math1();

  ExprPtr parse_concat();

  ExprPtr parse_math2();

  ExprPtr parse_pow();

  ExprPtr parse_unary(bool with_filter);

  ExprPtr parse_primary();

  ExprPtr parse_list();

  ExprPtr parse_dict();

  ExprPtr parse_postfix(ExprPtr node);

  ExprPtr parse_subscript(ExprPtr node);

  // An index expression, or a slice a:b:c (returned as a kSlice without object).
  ExprPtr parse_subscribed();

  Arguments parse_call_args();

  ExprPtr parse_call(ExprPtr node);

  ExprPtr parse_filter_expr(ExprPtr node);

  ExprPtr parse_filter(ExprPtr node, bool start_inline);

  ExprPtr parse_test(ExprPtr node);
};

}  // namespace ds::chat::detail
