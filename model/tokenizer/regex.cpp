#include "model/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "model/tokenizer/tokenizer_error.h"
#include "model/tokenizer/utf8.h"

namespace ds::tok {
namespace {

// Oniguruma's \s: the Unicode White_Space property.
constexpr std::string_view kSpaceSet =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";
// Oniguruma's \w: Letter | Mark | Decimal_Number | Connector_Punctuation.
constexpr std::string_view kWordSet = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Per-thread scratch for matching: match data for one pair of offsets and a JIT stack large
// enough for long runs of repeated classes.
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  MatchScratch() {
    data = pcre2_match_data_create(1, nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (!data || !stack || !context) throw std::bad_alloc();
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

}  // namespace

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

std::string Regex::rewrite_for_pcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      ++i;
      if (e == 's' || e == 'w') {
        const std::string_view set = (e == 's') ? kSpaceSet : kWordSet;
        if (in_class) {
          out += set;
        } else {
          out += '[';
          out += set;
          out += ']';
        }
      } else if ((e == 'S' || e == 'W') && !in_class) {
        out += "[^";
        out += (e == 'S') ? kSpaceSet : kWordSet;
        out += ']';
      } else {
        out += '\\';
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      const std::size_t close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

Regex::Regex(const std::string& oniguruma_pattern)
    : impl_(std::make_unique<Impl>()), rewritten_(rewrite_for_pcre2(oniguruma_pattern)) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten_.data()), rewritten_.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &err_offset,
                              nullptr);
  if (!impl_->code)
    throw TokenizerError("invalid regex /" + oniguruma_pattern + "/: " + pcre2_message(err) +
                         " at offset " + std::to_string(err_offset) + " of the PCRE2 form /" +
                         rewritten_ + "/");
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

void Regex::find_all(std::string_view text,
                     const std::function<void(std::size_t, std::size_t)>& on_match) const {
  MatchScratch& s = scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const std::size_t n = text.size();
  std::size_t offset = 0;
  while (offset <= n) {
    int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, n, offset, PCRE2_NO_UTF_CHECK,
                                          s.data, s.context)
                        : -1;
    if (!impl_->jit || rc == PCRE2_ERROR_JIT_STACKLIMIT)
      rc = pcre2_match(impl_->code, subject, n, offset, PCRE2_NO_UTF_CHECK, s.data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) throw TokenizerError("regex match failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
    const std::size_t start = ov[0], end = ov[1];
    on_match(start, end);
    if (end > start) {
      offset = end;
    } else {
      if (end >= n) return;
      char32_t cp;
      const std::size_t len = utf8::decode_one(text, end, cp);
      offset = end + (len ? len : 1);
    }
  }
}

}  // namespace ds::tok
