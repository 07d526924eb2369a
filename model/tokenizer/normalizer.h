// The normalizer stage of an HF tokenizer: Unicode normalization of the input text.
//
// tokenizer.json's "normalizer" may be null, one of NFC / NFD / NFKC / NFKD, or a Sequence of
// them; any other type is refused at load time (it belongs to tokenizer kinds this project
// does not serve). The forms are computed with utf8proc. NFC first checks whether the text is
// already normalized, code point by code point (a table derived from utf8proc's data marks the
// code points NFC never changes in any context; ASCII, Latin, CJK ideographs, kana, Hangul
// syllables and emoji all are), and only then calls utf8proc: most text costs one scan.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds::tok {

class Normalizer {
 public:
  enum class Form { kNFC, kNFD, kNFKC, kNFKD };

  Normalizer() = default;
  // Builds from the "normalizer" value of tokenizer.json (null allowed). Throws TokenizerError
  // naming the unsupported type.
  static Normalizer from_json(const nlohmann::json& j);

  bool empty() const { return forms_.empty(); }

  // Normalizes valid UTF-8 `text`. Returns a view of `text` itself when nothing changes,
  // otherwise a view of `storage`.
  std::string_view apply(std::string_view text, std::string& storage) const;

  // True when NFC leaves valid UTF-8 `text` unchanged by the per-code-point check above
  // (false means "maybe": utf8proc decides). Exposed for tests.
  static bool nfc_quick_check(std::string_view text);
  // `form` of valid UTF-8 `text`, always computed by utf8proc (no quick check).
  static std::string full(std::string_view text, Form form);

 private:
  std::vector<Form> forms_;
};

}  // namespace ds::tok
