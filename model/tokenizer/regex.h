// A compiled Unicode regular expression (PCRE2, UTF + UCP mode, JIT when available) with the
// matching semantics HF tokenizers gets from Oniguruma.
//
// tokenizer.json patterns are written for Oniguruma (Ruby syntax). PCRE2 reads them the same
// way except for the shorthand classes, so the pattern is rewritten before compiling:
//  * \s / \S become the Unicode White_Space set (Oniguruma's definition; PCRE2 10.42 also
//    counts U+180E), inside and outside bracket expressions;
//  * \w / \W become Letter | Mark | Decimal_Number | Connector_Punctuation (Oniguruma's word
//    class; PCRE2 10.42 uses letters, all numbers and '_').
// ^ and $ match at line boundaries, as they always do in Ruby syntax.
//
// The compiled code is immutable and shared; each search allocates its own match data, so
// one Regex can be used from many threads at once.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace ds::tok {

class Regex {
 public:
  // Throws TokenizerError with PCRE2's message and the offset for an invalid pattern.
  explicit Regex(const std::string& oniguruma_pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(start, end) for each successive non-overlapping match in valid UTF-8
  // `text`, leftmost first. After an empty match the search resumes one code point later.
  void find_all(std::string_view text,
                const std::function<void(std::size_t, std::size_t)>& on_match) const;

  // The pattern as rewritten for PCRE2 (exposed for tests).
  const std::string& pcre2_pattern() const { return rewritten_; }

  static std::string rewrite_for_pcre2(std::string_view oniguruma_pattern);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string rewritten_;
};

}  // namespace ds::tok
