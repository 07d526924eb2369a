#include "model/tokenizer/normalizer.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "model/tokenizer/tokenizer_error.h"

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

// True when every code point is below U+0300: every lead byte is below 0xCC.
bool below_combining_marks(std::string_view text) {
  for (const char c : text)
    if (static_cast<unsigned char>(c) >= 0xCC) return false;
  return true;
}

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& j) {
  Normalizer n;
  add_forms(j, n.forms_);
  return n;
}

std::string_view Normalizer::apply(std::string_view text, std::string& storage) const {
  std::string_view cur = text;
  for (const Form form : forms_) {
    if (form == Form::kNFC && below_combining_marks(cur)) continue;
    int options = UTF8PROC_STABLE;
    switch (form) {
      case Form::kNFC: options |= UTF8PROC_COMPOSE; break;
      case Form::kNFD: options |= UTF8PROC_DECOMPOSE; break;
      case Form::kNFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
      case Form::kNFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t len =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(cur.data()),
                     static_cast<utf8proc_ssize_t>(cur.size()), &out,
                     static_cast<utf8proc_option_t>(options));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
    // The input was validated by the caller, so utf8proc cannot fail except on memory.
    if (len < 0) throw std::bad_alloc();
    storage.assign(reinterpret_cast<const char*>(out), static_cast<std::size_t>(len));
    cur = storage;
  }
  return cur;
}

}  // namespace ds::tok
