#include "model/tokenizer/byte_level.h"

#include "model/tokenizer/utf8.h"

namespace ds::tok {

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_.fill(-1);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
    char_of_[b] = cp;
    utf8::append(text_of_[b], cp);
    byte_of_[cp] = b;
  }
}

std::optional<unsigned char> ByteLevelAlphabet::byte_of(char32_t cp) const {
  if (cp >= byte_of_.size() || byte_of_[cp] < 0) return std::nullopt;
  return static_cast<unsigned char>(byte_of_[cp]);
}

std::string ByteLevelAlphabet::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += text_of_[static_cast<unsigned char>(c)];
  return out;
}

std::string ByteLevelAlphabet::token_bytes(std::string_view token_text) const {
  std::string out;
  out.reserve(token_text.size());
  for (std::size_t i = 0; i < token_text.size();) {
    char32_t cp;
    const std::size_t len = utf8::decode_one(token_text, i, cp);
    const auto b = len ? byte_of(cp) : std::nullopt;
    if (!b) return std::string(token_text);  // not a byte-level token: its own bytes
    out.push_back(static_cast<char>(*b));
    i += len;
  }
  return out;
}

}  // namespace ds::tok
