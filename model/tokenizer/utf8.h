// UTF-8 helpers shared by the tokenizer and the chat template engine.
//
// The one rule that matters for HF compatibility is the lossy conversion: tokens are byte
// strings, so a decoded id sequence can hold invalid or truncated UTF-8, and HF's decode turns
// it into text with Rust's String::from_utf8_lossy. That function replaces each "maximal
// subpart" of an ill-formed sequence (Unicode's recommended practice) with one U+FFFD:
//  * a byte that cannot start a sequence (80..BF, C0, C1, F5..FF) is one error;
//  * a valid lead followed by a byte that cannot continue it is one error covering the lead
//    and the continuation bytes accepted so far (E0 must be followed by A0..BF, ED by 80..9F,
//    F0 by 90..BF, F4 by 80..8F);
//  * a sequence cut off by the end of the input is one error.
// lossy_utf8_prefix() applies the same rule but can stop before a trailing sequence that is
// still incomplete, which is what lets the streaming detokenizer emit exactly the text the
// full decode would produce, piece by piece.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds::tok::utf8 {

inline constexpr char32_t kReplacement = 0xFFFD;

// Appends the UTF-8 encoding of `cp` (which must be a Unicode scalar value) to `out`.
void append(std::string& out, char32_t cp);

// Length in bytes of the valid UTF-8 sequence starting at `s[i]`, or 0 if the bytes at `i`
// do not form a complete, valid sequence. On success stores the code point in `cp`.
std::size_t decode_one(std::string_view s, std::size_t i, char32_t& cp);

// True when `s` is entirely valid UTF-8.
bool is_valid(std::string_view s);

// Lossy conversion of all of `bytes` (from_utf8_lossy).
std::string lossy(std::string_view bytes);

// Lossy conversion of the longest prefix of `bytes` that does not end inside a sequence that
// could still become valid with more bytes. Appends the text to `out` and returns how many
// bytes were consumed; the rest (at most 3 bytes) must be kept for the next call. Converting
// in steps this way and finishing with lossy() on the remainder gives exactly lossy(all).
std::size_t lossy_prefix(std::string_view bytes, std::string& out);

// Number of code points in a valid UTF-8 string (an invalid byte counts as one).
std::size_t length(std::string_view s);

}  // namespace ds::tok::utf8
