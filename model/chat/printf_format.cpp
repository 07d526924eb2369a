// Python's printf-style formatting, str % args (builtins.h): conversions s r a d i u o x X
// e E f F g G c %, flags - + space # 0, width, precision and %(name)s with a mapping.
#include <cmath>
#include <cstdio>

#include "model/chat/builtins.h"
#include "model/chat/py_format.h"
#include "model/chat/py_string.h"
#include "model/tokenizer/utf8.h"

namespace ds::chat {

std::string py_percent_format(Interpreter& in, const std::string& fmt, const Value& args) {
  std::vector<Value> positional;
  const Value* mapping = nullptr;
  if (args.is_list() && args.list_obj().is_tuple) {
    positional = args.items();
  } else if (args.is_dict() && !args.is_namespace()) {
    mapping = &args;
    positional.push_back(args);
  } else {
    positional.push_back(args);
  }
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) eval_fail("incomplete format");
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      const std::size_t close = fmt.find(')', i);
      if (close == std::string::npos) eval_fail("incomplete format key");
      if (!mapping) eval_fail("format requires a mapping");
      const std::string key = fmt.substr(i + 1, close - i - 1);
      arg = mapping->dict_obj().find(std::string_view(key));
      if (!arg) eval_fail("KeyError: '" + key + "'");
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) flags += fmt[i++];
    const auto read_number = [&](int64_t& n) {
      if (i < fmt.size() && fmt[i] == '*') {
        if (next >= positional.size() || !positional[next].is_int()) eval_fail("* wants int");
        n = positional[next++].as_int();
        ++i;
        return true;
      }
      bool any = false;
      n = 0;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        n = std::min<int64_t>(n * 10 + (fmt[i++] - '0'), 1 << 20);
        any = true;
      }
      return any;
    };
    int64_t width = 0, precision = -1;
    read_number(width);
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      if (!read_number(precision)) precision = 0;
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) eval_fail("incomplete format");
    const char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next >= positional.size()) eval_fail("not enough arguments for format string");
      arg = &positional[next++];
    }
    in.check_size(static_cast<std::size_t>(std::max<int64_t>(width, 0)) + out.size());
    std::string piece;
    const bool left = flags.find('-') != std::string::npos;
    switch (conv) {
      case 's': case 'r': case 'a': {
        piece = conv == 's' ? py_str(*arg) : py_repr(*arg);
        if (precision >= 0) {
          const auto chars = py_chars(piece);
          if (static_cast<int64_t>(chars.size()) > precision) {
            piece.clear();
            for (int64_t k = 0; k < precision; ++k) piece += chars[static_cast<std::size_t>(k)];
          }
        }
        const auto len = static_cast<int64_t>(py_len(piece));
        if (width > len) {
          const std::string padding(static_cast<std::size_t>(width - len), ' ');
          piece = left ? piece + padding : padding + piece;
        }
        break;
      }
      case 'c': {
        if (arg->is_string() && py_len(arg->str()) == 1) {
          piece = arg->str();
        } else if (arg->is_int() || arg->is_bool()) {
          const int64_t v = arg->as_int();
          if (v < 0 || v > 0x10FFFF) eval_fail("%c arg not in range(0x110000)");
          const auto cp = static_cast<char32_t>(v);
          ds::tok::utf8::append(piece, (cp >= 0xD800 && cp <= 0xDFFF) ? ds::tok::utf8::kReplacement : cp);
        } else {
          eval_fail("%c requires int or char");
        }
        break;
      }
      case 'd': case 'i': case 'u': case 'o': case 'x': case 'X':
      case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': {
        if (!arg->is_number())
          eval_fail(std::string("%") + conv + " format: a real number is required, not " + arg->type_name());
        std::string spec = "%" + flags;
        if (width > 0) spec += std::to_string(width);
        if (precision >= 0) spec += "." + std::to_string(precision);
        char buf[512];
        if (conv == 'd' || conv == 'i' || conv == 'u' || conv == 'o' || conv == 'x' || conv == 'X') {
          double f = arg->as_float();
          if (arg->is_float() && (!std::isfinite(f) || std::fabs(f) > 9.2e18))
            eval_fail("cannot convert float to integer");
          const long long v = arg->is_float() ? static_cast<long long>(f) : arg->as_int();
          spec += "ll";
          spec += (conv == 'i' || conv == 'u') ? 'd' : conv;
          std::snprintf(buf, sizeof(buf), spec.c_str(), v);
        } else {
          spec += conv;
          std::snprintf(buf, sizeof(buf), spec.c_str(), arg->as_float());
        }
        piece = buf;
        break;
      }
      default:
        eval_fail(std::string("unsupported format character '") + conv + "'");
    }
    out += piece;
  }
  if (!mapping && next < positional.size()) eval_fail("not all arguments converted during string formatting");
  return out;
}

}  // namespace ds::chat
