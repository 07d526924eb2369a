// The byte-level alphabet of GPT-2 style BPE (HF's ByteLevel pre-tokenizer and decoder).
//
// Byte-level BPE works on bytes, but tokenizer.json spells every token as printable text: each
// of the 256 byte values stands for one code point. Printable Latin-1 bytes ('!'..'~',
// 0xA1..0xAC, 0xAE..0xFF) stand for themselves; the other 68 bytes (controls, space, 0x7F..0xA0,
// soft hyphen) take U+0100, U+0101, ... in byte order, so a space is "Ġ" (U+0120) and a newline
// "Ċ" (U+010A).
//
// Decoding follows HF's ByteLevel decoder exactly: a token whose characters all belong to this
// alphabet becomes the bytes they stand for; any other token (an added token such as
// "<|im_end|>" with a character outside it, or one with a plain space) contributes its own UTF-8
// bytes unchanged.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace ds::tok {

class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& get();

  // The code point that stands for byte b.
  char32_t char_of(unsigned char b) const { return char_of_[b]; }
  // The UTF-8 text of the code point that stands for byte b.
  std::string_view text_of(unsigned char b) const { return text_of_[b]; }
  // The byte a code point stands for, if it belongs to the alphabet.
  std::optional<unsigned char> byte_of(char32_t cp) const;

  // Byte-level spelling of raw bytes ("Ġhello" for " hello").
  std::string encode(std::string_view bytes) const;
  // The bytes a token stands for, by the decoder rule above.
  std::string token_bytes(std::string_view token_text) const;

 private:
  ByteLevelAlphabet();
  std::array<char32_t, 256> char_of_{};
  std::array<std::string, 256> text_of_{};
  std::array<int, 324> byte_of_{};  // indexed by code point; -1 = not in the alphabet
};

}  // namespace ds::tok
