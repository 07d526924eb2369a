#include "model/tokenizer/normalizer.h"

#include <cstdlib>
#include <memory>
#include <vector>

#include <utf8proc.h>

#include "model/tokenizer/tokenizer_error.h"
#include "model/tokenizer/utf8.h"

namespace ds::tok {
namespace {

void add_forms(const nlohmann::json& j, std::vector<Normalizer::Form>& forms) {
  if (j.is_null()) return;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw TokenizerError("normalizer: expected an object with a \"type\"");
  const std::string type = j["type"].get<std::string>();
  if (type == "NFC") {
    forms.push_back(Normalizer::Form::kNFC);
  } else if (type == "NFD") {
    forms.push_back(Normalizer::Form::kNFD);
  } else if (type == "NFKC") {
    forms.push_back(Normalizer::Form::kNFKC);
  } else if (type == "NFKD") {
    forms.push_back(Normalizer::Form::kNFKD);
  } else if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      throw TokenizerError("normalizer: Sequence without a \"normalizers\" list");
    for (const auto& sub : j["normalizers"]) add_forms(sub, forms);
  } else {
    throw TokenizerError("normalizer: unsupported type \"" + type +
                         "\" (supported: NFC, NFD, NFKC, NFKD, Sequence)");
  }
}

// Code points that NFC leaves unchanged whatever surrounds them: combining class 0, canonical
// decomposition absent or recomposing to the code point itself, and never the second element
// of a composition (conservatively: no element after the first of any canonical
// decomposition). Text made only of these is already in NFC. Computed once from utf8proc's
// tables for the code points below kLimit (the BMP and the emoji plane); anything above goes
// through utf8proc.
class NfcInert {
 public:
  static constexpr char32_t kLimit = 0x20000;
  static const NfcInert& get() {
    static const NfcInert table;
    return table;
  }
  bool inert(char32_t cp) const { return cp < kLimit && bits_[cp]; }

 private:
  std::vector<bool> bits_;
  NfcInert() : bits_(kLimit, true) {
    utf8proc_int32_t buf[8];
    for (char32_t cp = 0; cp < kLimit; ++cp) {
      const auto c = static_cast<utf8proc_int32_t>(cp);
      if (utf8proc_get_property(c)->combining_class != 0) bits_[cp] = false;
      int last_boundclass = 0;
      const utf8proc_ssize_t n = utf8proc_decompose_char(
          c, buf, 8, static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE), &last_boundclass);
      if (n <= 1 && (n < 1 || buf[0] == c)) continue;
      for (utf8proc_ssize_t k = 1; k < n && k < 8; ++k)
        if (static_cast<char32_t>(buf[k]) < kLimit) bits_[static_cast<std::size_t>(buf[k])] = false;
      // A code point that decomposes is inert only if NFC composes it back.
      std::string one;
      ds::tok::utf8::append(one, cp);
      utf8proc_uint8_t* out = nullptr;
      const utf8proc_ssize_t len = utf8proc_map(
          reinterpret_cast<const utf8proc_uint8_t*>(one.data()), static_cast<utf8proc_ssize_t>(one.size()),
          &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
      if (len < 0 || std::string_view(reinterpret_cast<const char*>(out), static_cast<std::size_t>(len)) != one)
        bits_[cp] = false;
      std::free(out);
    }
  }
};

// True when NFC would leave `text` (valid UTF-8) unchanged, judged per code point.
bool nfc_stable(std::string_view text) {
  const NfcInert& table = NfcInert::get();
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0xCC) {  // ASCII, or a lead byte of a code point below U+0300: always inert
      ++i;
      continue;
    }
    char32_t cp = 0;
    const std::size_t len = ds::tok::utf8::decode_one(text, i, cp);
    if (!len || !table.inert(cp)) return false;
    i += len;
  }
  return true;
}

}  // namespace

bool Normalizer::nfc_quick_check(std::string_view text) { return nfc_stable(text); }

Normalizer Normalizer::from_json(const nlohmann::json& j) {
  Normalizer n;
  add_forms(j, n.forms_);
  return n;
}

std::string Normalizer::full(std::string_view text, Form form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case Form::kNFC: options |= UTF8PROC_COMPOSE; break;
    case Form::kNFD: options |= UTF8PROC_DECOMPOSE; break;
    case Form::kNFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case Form::kNFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t len =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &out,
                   static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  // The input is valid UTF-8 (the tokenizer validates first), so only memory can fail.
  if (len < 0) throw std::bad_alloc();
  return std::string(reinterpret_cast<const char*>(out), static_cast<std::size_t>(len));
}

std::string_view Normalizer::apply(std::string_view text, std::string& storage) const {
  std::string_view cur = text;
  for (const Form form : forms_) {
    if (form == Form::kNFC && nfc_stable(cur)) continue;
    storage = full(cur, form);
    cur = storage;
  }
  return cur;
}

}  // namespace ds::tok
