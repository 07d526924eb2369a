#include "model/chat/parser.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>

#include "model/chat/builtins.h"
#include "model/chat/template_error.h"

namespace ds::chat {
namespace {

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::kData: return "template data";
    case TokenType::kVarBegin: return "'{{'";
    case TokenType::kVarEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "'{%'";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kEnd: return "end of template";
    case TokenType::kString: return "string";
    case TokenType::kInteger: case TokenType::kFloat: return "number";
    default: return "'" + t.value + "'";
  }
}

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
                  std::size_t opener_offset) {
    Body body;
    while (true) {
      const Token& t = cur();
      switch (t.type) {
        case TokenType::kEnd: {
          if (end_tags.size() == 0) return body;
          std::string expected;
          for (const auto tag : end_tags) expected += (expected.empty() ? "'" : " or '") + std::string(tag) + "'";
          fail(t.offset, "unexpected end of template: expected " + expected + " to close the '" +
                             std::string(opener) + "' block opened at " + map_->where(opener_offset));
        }
        case TokenType::kData: {
          auto s = std::make_unique<Stmt>(StmtKind::kText, t.offset);
          s->text = t.value;
          body.push_back(std::move(s));
          next();
          break;
        }
        case TokenType::kVarBegin: {
          next();
          auto s = std::make_unique<Stmt>(StmtKind::kOutput, t.offset);
          s->expr = parse_tuple(true, {}, false);
          if (cur().type != TokenType::kVarEnd)
            fail(cur().offset, "expected end of print statement, got " + describe(cur()));
          next();
          body.push_back(std::move(s));
          break;
        }
        case TokenType::kBlockBegin: {
          const Token& name = peek();
          if (name.type == TokenType::kName &&
              std::find(end_tags.begin(), end_tags.end(), name.value) != end_tags.end()) {
            next();
            return body;
          }
          next();
          body.push_back(parse_statement());
          break;
        }
        default:
          fail(t.offset, "unexpected " + describe(t));
      }
    }
  }

  StmtPtr parse_statement() {
    DepthGuard guard(*this);
    const Token& kw = cur();
    if (kw.type != TokenType::kName) fail(kw.offset, "expected a statement name, got " + describe(kw));
    const std::string& k = kw.value;
    if (k == "if") return parse_if();
    if (k == "for") return parse_for();
    if (k == "set") return parse_set();
    if (k == "macro") return parse_macro();
    if (k == "call") return parse_call_block();
    if (k == "filter") return parse_filter_block();
    if (k == "with") return parse_with();
    if (k == "generation") return parse_plain_block("generation", "endgeneration");
    if (k == "break" || k == "continue") {
      if (loop_depth_ == 0) fail(kw.offset, "'" + k + "' outside of a loop");
      auto s = std::make_unique<Stmt>(k == "break" ? StmtKind::kBreak : StmtKind::kContinue, kw.offset);
      next();
      expect_block_end();
      return s;
    }
    if (k.rfind("end", 0) == 0 || k == "elif" || k == "else")
      fail(kw.offset, "unexpected '" + k + "': no open block to continue or close");
    fail(kw.offset, "unknown tag '" + k + "'");
  }

  StmtPtr parse_if() {
    auto s = std::make_unique<Stmt>(StmtKind::kIf, cur().offset);
    const std::size_t opener = cur().offset;
    next();
    while (true) {
      ExprPtr cond = parse_tuple(false, {}, false);
      expect_block_end();
      Body body = parse_body({"elif", "else", "endif"}, "if", opener);
      s->branches.emplace_back(std::move(cond), std::move(body));
      const std::string tag = next().value;
      if (tag == "elif") continue;
      if (tag == "else") {
        expect_block_end();
        s->else_body = parse_body({"endif"}, "if", opener);
        next();
      }
      expect_block_end();
      return s;
    }
  }

  // Names (optionally a parenthesised or bare tuple of names) being assigned.
  void parse_targets(Stmt& s) {
    const bool parens = is_op("(");
    if (parens) next();
    while (true) {
      s.targets.push_back(expect_name());
      if (!is_op(",")) break;
      next();
      s.target_is_tuple = true;
      if (parens && is_op(")")) break;
      if (!parens && (is_name("in") || is_op("="))) break;
    }
    if (parens) {
      expect_op(")");
      s.target_is_tuple = true;
    }
    for (const auto& t : s.targets)
      if (t == "true" || t == "false" || t == "none" || t == "True" || t == "False" || t == "None")
        fail(s.offset, "cannot assign to '" + t + "'");
  }

  StmtPtr parse_for() {
    auto s = std::make_unique<Stmt>(StmtKind::kFor, cur().offset);
    const std::size_t opener = cur().offset;
    next();
    parse_targets(*s);
    if (!is_name("in")) fail(cur().offset, "expected 'in', got " + describe(cur()));
    next();
    s->iter = parse_tuple(false, {"recursive"}, false);
    if (is_name("if")) {
      next();
      s->filter = parse_expression(true);
    }
    if (is_name("recursive")) fail(cur().offset, "recursive loops are not supported");
    expect_block_end();
    ++loop_depth_;
    s->body = parse_body({"endfor", "else"}, "for", opener);
    --loop_depth_;
    if (next().value == "else") {
      expect_block_end();
      s->else_body = parse_body({"endfor"}, "for", opener);
      next();
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set() {
    const std::size_t opener = cur().offset;
    next();
    auto s = std::make_unique<Stmt>(StmtKind::kSet, opener);
    if (cur().type == TokenType::kName && peek().type == TokenType::kOperator && peek().value == ".") {
      s->targets.push_back(next().value);
      next();
      s->attribute = expect_name();
    } else {
      parse_targets(*s);
    }
    if (is_op("=")) {
      next();
      s->expr = parse_tuple(true, {}, false);
      expect_block_end();
      return s;
    }
    if (s->target_is_tuple) fail(cur().offset, "expected '=' after a tuple of names");
    s->kind = StmtKind::kSetBlock;
    if (is_op("|")) s->filter = parse_filter(nullptr, false);
    expect_block_end();
    s->body = parse_body({"endset"}, "set", opener);
    next();
    expect_block_end();
    return s;
  }

  void parse_signature(std::vector<MacroParam>& params) {
    expect_op("(");
    bool seen_default = false;
    while (!is_op(")")) {
      if (!params.empty()) {
        expect_op(",");
        if (is_op(")")) break;
      }
      MacroParam p;
      const std::size_t at = cur().offset;
      p.name = expect_name();
      if (is_op("=")) {
        next();
        p.default_value = parse_expression(true);
        seen_default = true;
      } else if (seen_default) {
        fail(at, "non-default argument follows default argument");
      }
      params.push_back(std::move(p));
    }
    next();
  }

  void scan_special_names(Stmt& s, std::size_t mark) {
    for (std::size_t k = mark; k < names_seen_.size(); ++k) {
      if (names_seen_[k] == "varargs") s.uses_varargs = true;
      if (names_seen_[k] == "kwargs") s.uses_kwargs = true;
      if (names_seen_[k] == "caller") s.uses_caller = true;
    }
  }

  StmtPtr parse_macro() {
    auto s = std::make_unique<Stmt>(StmtKind::kMacro, cur().offset);
    const std::size_t opener = cur().offset;
    next();
    s->name = expect_name();
    parse_signature(s->params);
    expect_block_end();
    const std::size_t mark = names_seen_.size();
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_body({"endmacro"}, "macro", opener);
    loop_depth_ = saved_loops;
    next();
    expect_block_end();
    scan_special_names(*s, mark);
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = std::make_unique<Stmt>(StmtKind::kCallBlock, cur().offset);
    const std::size_t opener = cur().offset;
    next();
    if (is_op("(")) parse_signature(s->params);
    const std::size_t at = cur().offset;
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::kCall) fail(at, "expected a call after 'call'");
    expect_block_end();
    const std::size_t mark = names_seen_.size();
    s->body = parse_body({"endcall"}, "call", opener);
    next();
    expect_block_end();
    scan_special_names(*s, mark);
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = std::make_unique<Stmt>(StmtKind::kFilterBlock, cur().offset);
    const std::size_t opener = cur().offset;
    next();
    s->filter = parse_filter(nullptr, true);
    expect_block_end();
    s->body = parse_body({"endfilter"}, "filter", opener);
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_with() {
    auto s = std::make_unique<Stmt>(StmtKind::kWith, cur().offset);
    const std::size_t opener = cur().offset;
    next();
    while (cur().type != TokenType::kBlockEnd) {
      if (!s->assignments.empty()) expect_op(",");
      std::string target = expect_name();
      expect_op("=");
      s->assignments.emplace_back(std::move(target), parse_expression(true));
    }
    expect_block_end();
    s->body = parse_body({"endwith"}, "with", opener);
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_plain_block(const char* name, std::string_view end) {
    auto s = std::make_unique<Stmt>(StmtKind::kBlock, cur().offset);
    const std::size_t opener = cur().offset;
    next();
    expect_block_end();
    s->body = parse_body({end}, name, opener);
    next();
    expect_block_end();
    return s;
  }

  // ---- expressions ----

  ExprPtr make(ExprKind k, std::size_t offset) { return std::make_unique<Expr>(k, offset); }

  // Sets e.depth from its (finished) children and refuses trees too deep to walk safely: long
  // chains such as a|f|f|f... or a+b+c+... are left-deep trees, which the depth guard on
  // recursive parsing alone does not bound.
  ExprPtr sealed(ExprPtr e) {
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

  ExprPtr binary(ExprKind k, std::string op, ExprPtr l, ExprPtr r, std::size_t offset) {
    auto e = make(k, offset);
    e->name = std::move(op);
    e->lhs = std::move(l);
    e->index = std::move(r);
    return sealed(std::move(e));
  }

  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
    const Token& t = cur();
    if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd || t.type == TokenType::kEnd)
      return true;
    if (is_op(")")) return true;
    if (t.type == TokenType::kName)
      for (const auto e : extra_end)
        if (t.value == e) return true;
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end,
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

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
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

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      const std::size_t offset = next().offset;
      l = binary(ExprKind::kOr, "or", std::move(l), parse_and(), offset);
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      const std::size_t offset = next().offset;
      l = binary(ExprKind::kAnd, "and", std::move(l), parse_not(), offset);
    }
    return l;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = make(ExprKind::kNot, next().offset);
      e->object = parse_not();
      return sealed(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      l = binary(ExprKind::kBinary, t.value, std::move(l), parse_concat(), t.offset);
    }
    return l;
  }

  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      const std::size_t offset = next().offset;
      l = binary(ExprKind::kBinary, "~", std::move(l), parse_math2(), offset);
    }
    return l;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      l = binary(ExprKind::kBinary, t.value, std::move(l), parse_pow(), t.offset);
    }
    return l;
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      const std::size_t offset = next().offset;
      l = binary(ExprKind::kBinary, "**", std::move(l), parse_unary(true), offset);
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary() {
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

  ExprPtr parse_list() {
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

  ExprPtr parse_dict() {
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

  ExprPtr parse_postfix(ExprPtr node) {
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

  ExprPtr parse_subscript(ExprPtr node) {
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
  ExprPtr parse_subscribed() {
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

  Arguments parse_call_args() {
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

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(ExprKind::kCall, cur().offset);
    e->object = std::move(node);
    e->args = parse_call_args();
    return sealed(std::move(e));
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
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

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
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

  ExprPtr parse_test(ExprPtr node) {
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
};

}  // namespace

ParsedTemplate parse_template(std::string_view source, const std::string& name) {
  return Parser(tokenize_template(source, name)).run();
}

}  // namespace ds::chat
