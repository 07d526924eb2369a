#include "model/chat/lexer.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include <utf8proc.h>

#include "model/chat/template_error.h"
#include "model/tokenizer/utf8.h"

namespace ds::chat {

namespace utf8 = ds::tok::utf8;

bool is_py_space(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x1C: case 0x1D: case 0x1E:
    case 0x1F: case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

namespace {

constexpr std::string_view kOperators2[] = {"//", "**", "==", "!=", ">=", "<="};
constexpr std::string_view kOperators1 = "+-/*%~[](){}><=.:|,;";

bool is_ident_start(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL:
      return true;
    default:
      return false;
  }
}

bool is_ident_continue(char32_t cp) {
  if (is_ident_start(cp)) return true;
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string normalize_newlines(std::string_view source) {
  // "\r\n" and "\r" become "\n"; one trailing newline is dropped (keep_trailing_newline=False).
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& name)
      : map_(std::make_shared<SourceMap>(name, normalize_newlines(source))), src_(map_->source()) {}

  LexedTemplate run() {
    const std::size_t n = src_.size();
    while (pos_ < n) {
      const std::size_t tag = find_tag_start(pos_);
      if (tag == std::string::npos) {
        emit(TokenType::kData, src_.substr(pos_), pos_);
        pos_ = n;
        break;
      }
      const char kind = src_[tag + 1];
      std::size_t after = tag + 2;
      char sign = 0;
      if (after < n && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      std::size_t raw_end = 0;
      const bool raw = kind == '%' && match_raw_begin(after, raw_end);
      emit_text(pos_, tag, sign, kind != '{');
      if (raw) {
        pos_ = raw_end;
        lex_raw(tag);
      } else if (kind == '#') {
        pos_ = after;
        lex_comment(tag);
      } else {
        emit(kind == '{' ? TokenType::kVarBegin : TokenType::kBlockBegin,
             kind == '{' ? "{{" : "{%", tag);
        pos_ = after;
        lex_tag(kind == '{', tag);
      }
    }
    tokens_.push_back({TokenType::kEnd, "", n});
    return {map_, std::move(tokens_)};
  }

 private:
  std::shared_ptr<SourceMap> map_;
  const std::string& src_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;

  [[noreturn]] void fail(std::size_t at, const std::string& message) const {
    map_->syntax_error(at, message);
  }

  void emit(TokenType type, std::string value, std::size_t at) {
    tokens_.push_back({type, std::move(value), at});
  }

  std::size_t find_tag_start(std::size_t from) const {
    for (std::size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  // Length of the Python white-space code point at `i`, or 0.
  std::size_t space_at(std::size_t i) const {
    if (i >= src_.size()) return 0;
    char32_t cp = 0;
    const std::size_t len = utf8::decode_one(src_, i, cp);
    return (len && is_py_space(cp)) ? len : 0;
  }
  std::size_t skip_spaces(std::size_t i) const {
    while (std::size_t len = space_at(i)) i += len;
    return i;
  }
  bool starts_with(std::size_t i, std::string_view s) const {
    return src_.compare(i, s.size(), s) == 0;
  }

  // Emits the text in [begin, end) that precedes a tag, applying the tag's white-space
  // control: '-' strips all trailing white space; otherwise block and comment tags get
  // lstrip_blocks unless the sign is '+'.
  void emit_text(std::size_t begin, std::size_t end, char sign, bool lstrip) {
    std::string_view text = std::string_view(src_).substr(begin, end - begin);
    if (sign == '-') {
      std::size_t e = text.size();
      while (e > 0) {
        std::size_t b = e - 1;
        while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
        char32_t cp = 0;
        if (!utf8::decode_one(text, b, cp) || !is_py_space(cp)) break;
        e = b;
      }
      text = text.substr(0, e);
    } else if (sign != '+' && lstrip) {
      const std::size_t nl = text.rfind('\n');
      const std::size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      const bool line_starting = begin == 0 || src_[begin - 1] == '\n';
      if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
          skip_spaces(begin + l_pos) == end)
        text = text.substr(0, l_pos);
    }
    if (!text.empty()) emit(TokenType::kData, std::string(text), begin);
  }

  // {%[-+]? \s* raw \s* (-%}\s* | %})  -- `after` is just past the sign.
  bool match_raw_begin(std::size_t after, std::size_t& end) const {
    std::size_t i = skip_spaces(after);
    if (!starts_with(i, "raw")) return false;
    i = skip_spaces(i + 3);
    if (starts_with(i, "-%}")) {
      end = skip_spaces(i + 3);
      return true;
    }
    if (starts_with(i, "%}")) {
      end = i + 2;
      return true;
    }
    return false;
  }

  void lex_raw(std::size_t open) {
    for (std::size_t i = src_.find("{%", pos_); i != std::string::npos; i = src_.find("{%", i + 1)) {
      std::size_t j = i + 2;
      char sign = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) sign = src_[j++];
      j = skip_spaces(j);
      if (!starts_with(j, "endraw")) continue;
      j = skip_spaces(j + 6);
      std::size_t end;
      if (starts_with(j, "+%}")) {
        end = j + 3;
      } else if (starts_with(j, "-%}")) {
        end = skip_spaces(j + 3);
      } else if (starts_with(j, "%}")) {
        end = j + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      emit_text(pos_, i, sign, true);
      pos_ = end;
      return;
    }
    fail(open, "missing end of raw directive");
  }

  void lex_comment(std::size_t open) {
    for (std::size_t i = pos_; i < src_.size(); ++i) {
      if (starts_with(i, "+#}")) {
        pos_ = i + 3;
        return;
      }
      if (starts_with(i, "-#}")) {
        pos_ = skip_spaces(i + 3);
        return;
      }
      if (starts_with(i, "#}")) {
        pos_ = i + 2;
        if (pos_ < src_.size() && src_[pos_] == '\n') ++pos_;
        return;
      }
    }
    fail(open, "missing end of comment tag");
  }

  void lex_tag(bool variable, std::size_t open) {
    std::vector<char> balance;
    const std::size_t n = src_.size();
    while (true) {
      if (pos_ >= n)
        fail(open, std::string("unexpected end of template: ") + (variable ? "'{{'" : "'{%'") +
                       " is never closed");
      if (balance.empty()) {
        if (variable) {
          if (starts_with(pos_, "-}}")) {
            emit(TokenType::kVarEnd, "}}", pos_);
            pos_ = skip_spaces(pos_ + 3);
            return;
          }
          if (starts_with(pos_, "}}")) {
            emit(TokenType::kVarEnd, "}}", pos_);
            pos_ += 2;
            return;
          }
        } else {
          if (starts_with(pos_, "+%}")) {
            emit(TokenType::kBlockEnd, "%}", pos_);
            pos_ += 3;
            return;
          }
          if (starts_with(pos_, "-%}")) {
            emit(TokenType::kBlockEnd, "%}", pos_);
            pos_ = skip_spaces(pos_ + 3);
            return;
          }
          if (starts_with(pos_, "%}")) {
            emit(TokenType::kBlockEnd, "%}", pos_);
            pos_ += 2;
            if (pos_ < n && src_[pos_] == '\n') ++pos_;  // trim_blocks
            return;
          }
        }
      }
      if (const std::size_t sp = space_at(pos_)) {
        pos_ += sp;
        continue;
      }
      if (lex_number() || lex_name() || lex_string()) continue;
      lex_operator(balance);
    }
  }

  bool lex_number() {
    const std::size_t start = pos_;
    if (!is_digit(src_[start])) return false;
    if (start > 0 && src_[start - 1] == '.') {
      // jinja2's float rule cannot start right after a '.', so "x.0.1" is x[0][1].
      return lex_integer();
    }
    // Float: digits[_digits] then (.digits)?e[+-]digits  or  .digits
    std::size_t i = start;
    const auto digits = [&](std::size_t& k) {
      if (k >= src_.size() || !is_digit(src_[k])) return false;
      while (k < src_.size() && (is_digit(src_[k]) ||
                                 (src_[k] == '_' && k + 1 < src_.size() && is_digit(src_[k + 1]))))
        ++k;
      return true;
    };
    digits(i);
    std::size_t j = i;
    bool is_float = false;
    if (j < src_.size() && src_[j] == '.') {
      std::size_t k = j + 1;
      if (digits(k)) {
        j = k;
        is_float = true;
      }
    }
    if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
      std::size_t k = j + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (digits(k)) {
        j = k;
        is_float = true;
      }
    }
    if (!is_float) return lex_integer();
    std::string text = src_.substr(start, j - start);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    emit(TokenType::kFloat, text, start);
    pos_ = j;
    return true;
  }

  bool lex_integer() {
    const std::size_t start = pos_;
    int base = 10;
    std::size_t i = start;
    if (src_[i] == '0' && i + 1 < src_.size()) {
      const char p = static_cast<char>(src_[i + 1] | 0x20);
      if (p == 'x' || p == 'o' || p == 'b') {
        base = p == 'x' ? 16 : (p == 'o' ? 8 : 2);
        i += 2;
      }
    }
    uint64_t value = 0;
    std::size_t ndigits = 0;
    const std::size_t digits_start = i;
    while (i < src_.size()) {
      char c = src_[i];
      if (c == '_' && i > digits_start && i + 1 < src_.size() && hex_value(src_[i + 1]) >= 0 &&
          hex_value(src_[i + 1]) < base) {
        ++i;
        continue;
      }
      const int d = hex_value(c);
      if (d < 0 || d >= base) break;
      // A decimal literal starting with 0 is only zeros (jinja2: 0(_?0)*).
      if (base == 10 && src_[start] == '0' && d != 0) break;
      if (value > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) / base)
        fail(start, "integer literal too large");
      value = value * base + static_cast<uint64_t>(d);
      ++ndigits;
      ++i;
    }
    if (ndigits == 0) {
      if (base != 10) i = start + 1;  // "0x" without digits: just the 0
      value = 0;
    }
    emit(TokenType::kInteger, std::to_string(value), start);
    pos_ = i;
    return true;
  }

  bool lex_name() {
    char32_t cp = 0;
    std::size_t len = utf8::decode_one(src_, pos_, cp);
    if (!len || !is_ident_start(cp)) return false;
    const std::size_t start = pos_;
    std::size_t i = pos_ + len;
    while (i < src_.size()) {
      len = utf8::decode_one(src_, i, cp);
      if (!len || !is_ident_continue(cp)) break;
      i += len;
    }
    emit(TokenType::kName, src_.substr(start, i - start), start);
    pos_ = i;
    return true;
  }

  bool lex_string() {
    const char quote = src_[pos_];
    if (quote != '\'' && quote != '"') return false;
    std::size_t i = pos_ + 1;
    while (i < src_.size() && src_[i] != quote) i += src_[i] == '\\' ? 2 : 1;
    if (i >= src_.size()) fail(pos_, std::string("unexpected char '") + quote + "' (unterminated string)");
    emit(TokenType::kString, unescape(pos_ + 1, i), pos_);
    pos_ = i + 1;
    return true;
  }

  // Python's unicode-escape decoding as jinja2 applies it to string literals.
  std::string unescape(std::size_t begin, std::size_t end) const {
    std::string out;
    for (std::size_t i = begin; i < end;) {
      if (src_[i] != '\\') {
        out += src_[i++];
        continue;
      }
      const std::size_t at = i;
      ++i;  // the lexer guarantees a character after a backslash inside the literal
      const char c = src_[i];
      const auto hex_escape = [&](int width) {
        char32_t v = 0;
        for (int k = 0; k < width; ++k) {
          const int d = (i + 1 + k < end) ? hex_value(src_[i + 1 + k]) : -1;
          if (d < 0)
            fail(at, std::string("truncated \\") + c + " escape in string literal");
          v = v * 16 + static_cast<char32_t>(d);
        }
        i += 1 + width;
        if (v > 0x10FFFF) fail(at, "illegal Unicode character in string literal");
        utf8::append(out, (v >= 0xD800 && v <= 0xDFFF) ? utf8::kReplacement : v);
      };
      switch (c) {
        case '\n': ++i; break;
        case '\\': out += '\\'; ++i; break;
        case '\'': out += '\''; ++i; break;
        case '"': out += '"'; ++i; break;
        case 'a': out += '\a'; ++i; break;
        case 'b': out += '\b'; ++i; break;
        case 'f': out += '\f'; ++i; break;
        case 'n': out += '\n'; ++i; break;
        case 'r': out += '\r'; ++i; break;
        case 't': out += '\t'; ++i; break;
        case 'v': out += '\v'; ++i; break;
        case 'x': hex_escape(2); break;
        case 'u': hex_escape(4); break;
        case 'U': hex_escape(8); break;
        case 'N': fail(at, "\\N{...} escapes are not supported");
        default:
          if (c >= '0' && c <= '7') {
            char32_t v = 0;
            int k = 0;
            while (k < 3 && i < end && src_[i] >= '0' && src_[i] <= '7') {
              v = v * 8 + static_cast<char32_t>(src_[i] - '0');
              ++i;
              ++k;
            }
            utf8::append(out, v);
          } else if (static_cast<unsigned char>(c) >= 0x80) {
            // jinja2 first turns non-ASCII characters into \x/\u/\U escapes, so a backslash
            // before one leaves that escape as literal text.
            char32_t cp = 0;
            const std::size_t len = utf8::decode_one(src_, i, cp);
            char buf[16];
            if (!len) cp = static_cast<unsigned char>(c);
            if (cp <= 0xFF) std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
            else if (cp <= 0xFFFF) std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
            else std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
            out += '\\';
            out += buf;
            i += len ? len : 1;
          } else {
            out += '\\';
            out += c;
            ++i;
          }
      }
    }
    return out;
  }

  void lex_operator(std::vector<char>& balance) {
    for (const std::string_view op : kOperators2) {
      if (starts_with(pos_, op)) {
        emit(TokenType::kOperator, std::string(op), pos_);
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    if (kOperators1.find(c) == std::string_view::npos) {
      char32_t cp = 0;
      const std::size_t len = utf8::decode_one(src_, pos_, cp);
      std::string ch = len ? src_.substr(pos_, len) : std::string(1, c);
      fail(pos_, "unexpected char '" + ch + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(pos_, std::string("unexpected '") + c + "'");
      if (balance.back() != c)
        fail(pos_, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    emit(TokenType::kOperator, std::string(1, c), pos_);
    ++pos_;
  }
};

}  // namespace

SourceMap::SourceMap(std::string name, std::string normalized_source)
    : name_(std::move(name)), source_(std::move(normalized_source)) {
  line_starts_.push_back(0);
  for (std::size_t i = 0; i < source_.size(); ++i)
    if (source_[i] == '\n') line_starts_.push_back(i + 1);
}

int SourceMap::line(std::size_t offset) const {
  return static_cast<int>(std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) -
                          line_starts_.begin());
}

int SourceMap::column(std::size_t offset) const {
  const std::size_t start = line_starts_[static_cast<std::size_t>(line(offset) - 1)];
  const std::size_t end = std::min(offset, source_.size());
  return static_cast<int>(utf8::length(std::string_view(source_).substr(start, end - start))) + 1;
}

std::string SourceMap::where(std::size_t offset) const {
  return name_ + ":" + std::to_string(line(offset)) + ":" + std::to_string(column(offset));
}

void SourceMap::syntax_error(std::size_t offset, const std::string& message) const {
  throw TemplateSyntaxError(where(offset) + ": " + message, line(offset), column(offset));
}

LexedTemplate tokenize_template(std::string_view source, const std::string& name) {
  return Lexer(source, name).run();
}

}  // namespace ds::chat
