// The template parser's statements (template_parser.h) and parse_template (parser.h).
#include "model/chat/parser.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>

#include "model/chat/builtins.h"
#include "model/chat/template_error.h"
#include "model/chat/template_parser.h"

namespace ds::chat::detail {

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

// ---- statements ----

// Parses until a block tag named in `end_tags`; returns with that name as the current token.
Body Parser::parse_body(std::initializer_list<std::string_view> end_tags, std::string_view opener,
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

StmtPtr Parser::parse_statement() {
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

StmtPtr Parser::parse_if() {
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
void Parser::parse_targets(Stmt& s) {
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

StmtPtr Parser::parse_for() {
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

StmtPtr Parser::parse_set() {
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

void Parser::parse_signature(std::vector<MacroParam>& params) {
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

void Parser::scan_special_names(Stmt& s, std::size_t mark) {
  for (std::size_t k = mark; k < names_seen_.size(); ++k) {
    if (names_seen_[k] == "varargs") s.uses_varargs = true;
    if (names_seen_[k] == "kwargs") s.uses_kwargs = true;
    if (names_seen_[k] == "caller") s.uses_caller = true;
  }
}

StmtPtr Parser::parse_macro() {
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

StmtPtr Parser::parse_call_block() {
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

StmtPtr Parser::parse_filter_block() {
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

StmtPtr Parser::parse_with() {
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

StmtPtr Parser::parse_plain_block(const char* name, std::string_view end) {
  auto s = std::make_unique<Stmt>(StmtKind::kBlock, cur().offset);
  const std::size_t opener = cur().offset;
  next();
  expect_block_end();
  s->body = parse_body({end}, name, opener);
  next();
  expect_block_end();
  return s;
}

}  // namespace ds::chat::detail

namespace ds::chat {

ParsedTemplate parse_template(std::string_view source, const std::string& name) {
  return detail::Parser(tokenize_template(source, name)).run();
}

}  // namespace ds::chat
