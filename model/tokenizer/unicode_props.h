// The few Unicode character properties the tokenizer needs, from utf8proc.
#pragma once

namespace ds::tok::unicode {

// Rust's char::is_whitespace: the White_Space property.
bool is_white_space(char32_t cp);
// Rust's char::is_alphanumeric (letters and numbers) or '_': a "word" character for
// single_word added tokens.
bool is_word_char(char32_t cp);

}  // namespace ds::tok::unicode
