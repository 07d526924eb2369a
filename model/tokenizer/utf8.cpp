#include "model/tokenizer/utf8.h"

namespace ds::tok::utf8 {
namespace {

enum class Scan { kOk, kInvalid, kIncomplete };

struct ScanResult {
  Scan status;
  std::size_t len;  // bytes of the valid sequence, or of the maximal ill-formed subpart
  char32_t cp;
};

inline bool is_cont(unsigned char b) { return (b & 0xC0) == 0x80; }

// Classifies the bytes at s[i] following the maximal-subpart rule described in utf8.h.
ScanResult scan(std::string_view s, std::size_t i) {
  const std::size_t n = s.size();
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {Scan::kOk, 1, b0};
  std::size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  char32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Scan::kInvalid, 1, 0};
  }
  for (std::size_t k = 1; k < need; ++k) {
    if (i + k >= n) return {Scan::kIncomplete, k, 0};
    const auto b = static_cast<unsigned char>(s[i + k]);
    const bool ok = (k == 1) ? (b >= lo && b <= hi) : is_cont(b);
    if (!ok) return {Scan::kInvalid, k, 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Scan::kOk, need, cp};
}

constexpr char kReplacementUtf8[] = "\xEF\xBF\xBD";

}  // namespace

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::size_t decode_one(std::string_view s, std::size_t i, char32_t& cp) {
  if (i >= s.size()) return 0;
  const ScanResult r = scan(s, i);
  if (r.status != Scan::kOk) return 0;
  cp = r.cp;
  return r.len;
}

bool is_valid(std::string_view s) {
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    // ASCII runs are the common case; skip them eight bytes at a time.
    while (i + 8 <= n) {
      std::uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const ScanResult r = scan(s, i);
    if (r.status != Scan::kOk) return false;
    i += r.len;
  }
  return true;
}

std::size_t lossy_prefix(std::string_view bytes, std::string& out) {
  std::size_t i = 0;
  const std::size_t n = bytes.size();
  std::size_t run = 0;  // start of the pending run of valid bytes, copied in one go
  while (i < n) {
    const ScanResult r = scan(bytes, i);
    if (r.status == Scan::kOk) {
      i += r.len;
      continue;
    }
    out.append(bytes.data() + run, i - run);
    if (r.status == Scan::kIncomplete) return i;
    out.append(kReplacementUtf8, 3);
    i += r.len;
    run = i;
  }
  out.append(bytes.data() + run, n - run);
  return n;
}

std::string lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const std::size_t used = lossy_prefix(bytes, out);
  if (used < bytes.size()) out.append(kReplacementUtf8, 3);  // a truncated final sequence
  return out;
}

std::size_t length(std::string_view s) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp;
    const std::size_t len = decode_one(s, i, cp);
    i += len ? len : 1;
    ++count;
  }
  return count;
}

}  // namespace ds::tok::utf8
