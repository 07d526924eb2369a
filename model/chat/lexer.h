// Lexer for the Jinja subset, reproducing jinja2's lexer with HF's settings
// (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False):
//  * "\r\n" and "\r" become "\n", and one trailing newline of the source is dropped;
//  * {%- / {{- / {#- remove all white space before the tag; -%} / -}} / -#} all after it;
//  * trim_blocks: the first newline after a block or comment tag is removed;
//  * lstrip_blocks: spaces and tabs between the start of a line and a block or comment tag
//    are removed ({%+ keeps them);
//  * {% raw %}...{% endraw %} is literal text; comments {# #} vanish;
//  * inside tags: names, numbers (0x/0o/0b, underscores, floats with exponents), strings with
//    Python escapes (\n, \t, \xhh, \uXXXX, \UXXXXXXXX, octal; unknown escapes stay as written),
//    and operators. A closing }} or %} only ends a tag when brackets are balanced, so
//    {{ {'a': 1} }} works.
// Every token records its byte offset in the normalized source; SourceMap turns offsets into
// "NAME:LINE:COLUMN" (1-based, columns in code points) only when a message needs one.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ds::chat {

class SourceMap {
 public:
  SourceMap(std::string name, std::string normalized_source);
  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }
  int line(std::size_t offset) const;
  int column(std::size_t offset) const;
  // "NAME:LINE:COLUMN"
  std::string where(std::size_t offset) const;
  // Throws TemplateSyntaxError("NAME:LINE:COLUMN: message").
  [[noreturn]] void syntax_error(std::size_t offset, const std::string& message) const;

 private:
  std::string name_;
  std::string source_;
  std::vector<std::size_t> line_starts_;
};

enum class TokenType {
  kData,        // text between tags
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // value = the unescaped text
  kInteger,     // value = decimal digits after base conversion
  kFloat,       // value = the literal without underscores
  kOperator,
  kEnd,
};

struct Token {
  TokenType type;
  std::string value;
  std::size_t offset;
};

struct LexedTemplate {
  std::shared_ptr<const SourceMap> map;
  std::vector<Token> tokens;  // ends with kEnd
};

// Tokenizes `source`. Throws TemplateSyntaxError ("NAME:LINE:COLUMN: message") for an
// unterminated tag, comment, raw block or string, an unexpected character, or unbalanced
// brackets.
LexedTemplate tokenize_template(std::string_view source, const std::string& name);

// Python's str.isspace for one code point.
bool is_py_space(char32_t cp);

}  // namespace ds::chat
