// The normalizer stage of an HF tokenizer: Unicode normalization of the input text.
//
// tokenizer.json's "normalizer" may be null, one of NFC / NFD / NFKC / NFKD, or a Sequence of
// them; any other type is refused at load time (it belongs to tokenizer kinds this project
// does not serve). The forms are computed with utf8proc. Text made only of code points below
// U+0300 (ASCII, Latin-1, Latin Extended, IPA) is already in NFC (none of them decomposes or
// combines with a neighbour), so NFC skips utf8proc for it: most prose costs one byte scan.
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

 private:
  std::vector<Form> forms_;
};

}  // namespace ds::tok
