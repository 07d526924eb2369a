// The template parser's expressions (template_parser.h): conditional, boolean, comparison,
// arithmetic, unary and primary expressions, literals, subscripts, calls, filters and tests.
#include <algorithm>
#include <cstdlib>

#include "model/chat/builtins.h"
#include "model/chat/template_error.h"
#include "model/chat/template_parser.h"

namespace ds::chat::detail {

// Sets e.depth from its (finished) children and refuses trees too deep to walk safely: long
// chains such as a|f|f|f... or a+b+c+... are left-deep trees, which the depth guard on
// recursive parsing alone does not bound.
ExprPtr Parser::sealed(ExprPtr e) {
  int d = 0;
  const auto see = [&d](const ExprPtr& c) {
    if (c) d = std::max(d, c->depth);
  };
  see(e->object);
  see(e->index);
  see(e->lhs);
  see(e->otherwise);
  see(e->start);
  see(e->stop);
  see(e->step);
  for (const auto& c : e->items) see(c);
  for (const auto& [k, v] : e->pairs) {
    see(k);
    see(v);
  }
  for (const auto& [op, c] : e->comparisons) see(c);
  for (const auto& c : e->args.positional) see(c);
  for (const auto& [k, c] : e->args.keyword) see(c);
  e->depth = d + 1;
  if (e->depth > kMaxExprDepth)
    fail(e->offset, "expression nested too deeply (more than " + std::to_string(kMaxExprDepth) +
                        " levels)");
  return e;
}

ExprPtr Parser::binary(ExprKind k, std::string op, ExprPtr l, ExprPtr r, std::size_t offset) {
  auto e = make(k, offset);
  e->name = std::move(op);
  e->lhs = std::move(l);
  e->index = std::move(r);
  return sealed(std::move(e));
}

bool Parser::is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
  const Token& t = cur();
  if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd || t.type == TokenType::kEnd)
    return true;
  if (is_op(")")) return true;
  if (t.type == TokenType::kName)
    for (const auto e : extra_end)
      if (t.value == e) return true;
  return false;
}

ExprPtr Parser::parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                    bool explicit_parentheses) {
  const std::size_t offset = cur().offset;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) fail(cur().offset, "expected an expression, got " + describe(cur()));
  }
  auto e = make(ExprKind::kTuple, offset);
  e->items = std::move(items);
  return sealed(std::move(e));
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  ExprPtr e = parse_or();
  while (is_name("if")) {
    const std::size_t offset = cur().offset;
    next();
    ExprPtr cond = parse_or();
    ExprPtr otherwise;
    if (is_name("else")) {
      next();
      otherwise = parse_expression(true);
    }
    auto c = make(ExprKind::kCondExpr, offset);
    c->index = std::move(cond);
    c->lhs = std::move(e);
    c->otherwise = std::move(otherwise);
    e = sealed(std::move(c));
  }
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr l = parse_and();
  while (is_name("or")) {
    const std::size_t offset = next().offset;
    l = binary(ExprKind::kOr, "or", std::move(l), parse_and(), offset);
  }
  return l;
}

ExprPtr Parser::parse_and() {
  ExprPtr l = parse_not();
  while (is_name("and")) {
    const std::size_t offset = next().offset;
    l = binary(ExprKind::kAnd, "and", std::move(l), parse_not(), offset);
  }
  return l;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    auto e = make(ExprKind::kNot, next().offset);
    e->object = parse_not();
    return sealed(std::move(e));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const std::size_t offset = cur().offset;
  ExprPtr first = parse_math1();
  std::vector<std::pair<std::string, ExprPtr>> ops;
  while (true) {
    if (cur().type == TokenType::kOperator &&
        (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
         cur().value == "<=" || cur().value == ">" || cur().value == ">=")) {
      std::string op = next().value;
      ops.emplace_back(std::move(op), parse_math1());
    } else if (is_name("in")) {
      next();
      ops.emplace_back("in", parse_math1());
    } else if (is_name("not") && peek().type == TokenType::kName && peek().value == "in") {
      next();
      next();
      ops.emplace_back("notin", parse_math1());
    } else {
      break;
    }
  }
  if (ops.empty()) return first;
  auto e = make(ExprKind::kCompare, offset);
  e->object = std::move(first);
  e->comparisons = std::move(ops);
  return sealed(std::move(e));
}

ExprPtr Parser::parse_math1() {
  ExprPtr l = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& t = next();
    l = binary(ExprKind::kBinary, t.value, std::move(l), parse_concat(), t.offset);
  }
  return l;
}

ExprPtr Parser::parse_concat() {
  ExprPtr l = parse_math2();
  while (is_op("~")) {
    const std::size_t offset = next().offset;
    l = binary(ExprKind::kBinary, "~", std::move(l), parse_math2(), offset);
  }
  return l;
}

ExprPtr Parser::parse_math2() {
  ExprPtr l = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& t = next();
    l = binary(ExprKind::kBinary, t.value, std::move(l), parse_pow(), t.offset);
  }
  return l;
}

ExprPtr Parser::parse_pow() {
  ExprPtr l = parse_unary(true);
  while (is_op("**")) {
    const std::size_t offset = next().offset;
    l = binary(ExprKind::kBinary, "**", std::move(l), parse_unary(true), offset);
  }
  return l;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    const Token& t = next();
    node = make(t.value == "-" ? ExprKind::kNeg : ExprKind::kPos, t.offset);
    node->object = parse_unary(false);
    node = sealed(std::move(node));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  switch (t.type) {
    case TokenType::kName: {
      next();
      if (t.value == "true" || t.value == "True" || t.value == "false" || t.value == "False") {
        auto e = make(ExprKind::kLiteral, t.offset);
        e->value = Value(t.value == "true" || t.value == "True");
        return e;
      }
      if (t.value == "none" || t.value == "None") {
        auto e = make(ExprKind::kLiteral, t.offset);
        e->value = Value::none();
        return e;
      }
      auto e = make(ExprKind::kName, t.offset);
      e->name = t.value;
      names_seen_.push_back(t.value);
      return e;
    }
    case TokenType::kString: {
      auto e = make(ExprKind::kLiteral, t.offset);
      std::string s;
      while (cur().type == TokenType::kString) s += next().value;
      e->value = Value(std::move(s));
      return e;
    }
    case TokenType::kInteger: {
      next();
      auto e = make(ExprKind::kLiteral, t.offset);
      e->value = Value(static_cast<int64_t>(std::strtoll(t.value.c_str(), nullptr, 10)));
      return e;
    }
    case TokenType::kFloat: {
      next();
      auto e = make(ExprKind::kLiteral, t.offset);
      e->value = Value(std::strtod(t.value.c_str(), nullptr));
      return e;
    }
    case TokenType::kOperator:
      if (t.value == "(") {
        next();
        ExprPtr e = parse_tuple(true, {}, true);
        expect_op(")");
        return e;
      }
      if (t.value == "[") return parse_list();
      if (t.value == "{") return parse_dict();
      break;
    default:
      break;
  }
  fail(t.offset, "unexpected " + describe(t));
}

ExprPtr Parser::parse_list() {
  auto e = make(ExprKind::kList, next().offset);
  while (!is_op("]")) {
    if (!e->items.empty()) {
      expect_op(",");
      if (is_op("]")) break;
    }
    e->items.push_back(parse_expression(true));
  }
  next();
  return sealed(std::move(e));
}

ExprPtr Parser::parse_dict() {
  auto e = make(ExprKind::kDict, next().offset);
  while (!is_op("}")) {
    if (!e->pairs.empty()) {
      expect_op(",");
      if (is_op("}")) break;
    }
    ExprPtr key = parse_expression(true);
    expect_op(":");
    ExprPtr value = parse_expression(true);
    e->pairs.emplace_back(std::move(key), std::move(value));
  }
  next();
  return sealed(std::move(e));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".")) {
      const std::size_t offset = next().offset;
      const Token& t = cur();
      if (t.type == TokenType::kName) {
        auto e = make(ExprKind::kGetAttr, offset);
        e->object = std::move(node);
        e->name = next().value;
        node = sealed(std::move(e));
      } else if (t.type == TokenType::kInteger) {
        auto idx = make(ExprKind::kLiteral, t.offset);
        idx->value = Value(static_cast<int64_t>(std::strtoll(next().value.c_str(), nullptr, 10)));
        auto e = make(ExprKind::kGetItem, offset);
        e->object = std::move(node);
        e->index = std::move(idx);
        node = sealed(std::move(e));
      } else {
        fail(t.offset, "expected a name or number after '.', got " + describe(t));
      }
    } else if (is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const std::size_t offset = next().offset;  // '['
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  next();
  if (args.empty()) fail(offset, "expected a subscript");
  if (args.size() == 1 && args[0]->kind == ExprKind::kSlice) {
    args[0]->object = std::move(node);
    return sealed(std::move(args[0]));
  }
  for (const auto& a : args)
    if (a->kind == ExprKind::kSlice) fail(a->offset, "slices inside a tuple subscript are not supported");
  auto e = make(ExprKind::kGetItem, offset);
  e->object = std::move(node);
  if (args.size() == 1) {
    e->index = std::move(args[0]);
  } else {
    auto t = make(ExprKind::kTuple, offset);
    t->items = std::move(args);
    e->index = sealed(std::move(t));
  }
  return sealed(std::move(e));
}

// An index expression, or a slice a:b:c (returned as a kSlice without object).
ExprPtr Parser::parse_subscribed() {
  const std::size_t offset = cur().offset;
  ExprPtr start;
  if (!is_op(":")) {
    start = parse_expression(true);
    if (!is_op(":")) return start;
  }
  next();  // ':'
  auto s = make(ExprKind::kSlice, offset);
  s->start = std::move(start);
  if (!is_op(":") && !is_op("]") && !is_op(",")) s->stop = parse_expression(true);
  if (is_op(":")) {
    next();
    if (!is_op("]") && !is_op(",")) s->step = parse_expression(true);
  }
  return s;
}

Arguments Parser::parse_call_args() {
  Arguments args;
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) {
      expect_op(",");
      if (is_op(")")) break;
    }
    first = false;
    if (is_op("*") || is_op("**")) fail(cur().offset, "*args and **kwargs in calls are not supported");
    if (cur().type == TokenType::kName && peek().type == TokenType::kOperator && peek().value == "=") {
      std::string key = next().value;
      next();
      args.keyword.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!args.keyword.empty()) fail(cur().offset, "positional argument follows keyword argument");
      args.positional.push_back(parse_expression(true));
    }
  }
  next();
  return args;
}

ExprPtr Parser::parse_call(ExprPtr node) {
  auto e = make(ExprKind::kCall, cur().offset);
  e->object = std::move(node);
  e->args = parse_call_args();
  return sealed(std::move(e));
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      node = parse_filter(std::move(node), false);
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    const std::size_t offset = cur().offset;
    std::string name = expect_name();
    while (is_op(".")) {
      next();
      name += "." + expect_name();
    }
    // jinja2 resolves filter names when compiling the template.
    if (!has_filter(name)) fail(offset, "no filter named '" + name + "'");
    auto e = make(ExprKind::kFilter, offset);
    e->object = std::move(node);
    e->name = std::move(name);
    if (is_op("(")) e->args = parse_call_args();
    node = sealed(std::move(e));
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  const std::size_t offset = next().offset;  // 'is'
  bool negated = false;
  if (is_name("not")) {
    next();
    negated = true;
  }
  const std::size_t name_offset = cur().offset;
  std::string name = expect_name();
  while (is_op(".")) {
    next();
    name += "." + expect_name();
  }
  if (!has_test(name)) fail(name_offset, "no test named '" + name + "'");
  auto e = make(ExprKind::kTest, offset);
  e->object = std::move(node);
  e->name = std::move(name);
  const Token& t = cur();
  if (is_op("(")) {
    e->args = parse_call_args();
  } else if ((t.type == TokenType::kName || t.type == TokenType::kString ||
              t.type == TokenType::kInteger || t.type == TokenType::kFloat || is_op("[") ||
              is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail(t.offset, "cannot chain multiple tests with 'is'");
    e->args.positional.push_back(parse_postfix(parse_primary()));
  }
  e = sealed(std::move(e));
  if (!negated) return e;
  auto n = make(ExprKind::kNot, offset);
  n->object = std::move(e);
  return sealed(std::move(n));
}

}  // namespace ds::chat::detail
