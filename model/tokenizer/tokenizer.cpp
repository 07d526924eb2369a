#include "model/tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/tokenizer/added_vocabulary.h"
#include "model/tokenizer/bpe_model.h"
#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/normalizer.h"
#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/utf8.h"

namespace ds::tok {

struct Tokenizer::Impl {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedVocabulary added;
  std::vector<std::string> id_text;    // spelling per id ("" when unknown)
  std::vector<std::string> id_bytes;   // decoded bytes per id
  std::vector<uint8_t> id_flags;       // kAdded | kSpecial
  TokenIndex added_index;              // added token content -> id

  static constexpr uint8_t kKnown = 1, kAdded = 2, kSpecial = 4;

  void encode_plain(std::string_view text, bool allow_special, std::vector<int32_t>& out) const;
};

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw TokenizerError("cannot read " + path.string());
  return ss.str();
}

// The decoder must be ByteLevel (possibly alone in a Sequence): the only decoding this class
// implements. Anything else would silently produce wrong text, so it is refused.
void check_decoder(const nlohmann::json& d) {
  if (d.is_null()) throw TokenizerError("decoder: missing (a ByteLevel decoder is required)");
  const std::string type = d.value("type", std::string());
  if (type == "ByteLevel") return;
  if (type == "Sequence" && d.contains("decoders") && d["decoders"].is_array()) {
    for (const auto& sub : d["decoders"]) check_decoder(sub);
    return;
  }
  throw TokenizerError("decoder: unsupported type \"" + type + "\" (only ByteLevel)");
}

bool flag(const nlohmann::json& t, const char* key, bool fallback) {
  return t.contains(key) && t[key].is_boolean() ? t[key].get<bool>() : fallback;
}

}  // namespace

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& model_dir_or_tokenizer_json) {
  std::filesystem::path path(model_dir_or_tokenizer_json);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) path /= "tokenizer.json";
  if (!std::filesystem::exists(path, ec))
    throw TokenizerError("tokenizer file not found: " + path.string());
  return from_json_text(read_file(path), path.string());
}

Tokenizer Tokenizer::from_json_text(std::string_view json_text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(origin + ": invalid JSON: " + e.what());
  }
  Tokenizer t;
  Impl& im = *t.impl_;
  try {
    if (!j.is_object()) throw TokenizerError("top level must be an object");
    if (!j.contains("model")) throw TokenizerError("no \"model\"");
    im.model = BpeModel::from_json(j["model"]);
    im.normalizer = Normalizer::from_json(j.value("normalizer", nlohmann::json()));
    im.pre_tokenizer = PreTokenizer::from_json(j.value("pre_tokenizer", nlohmann::json()));
    if (!im.pre_tokenizer.has_byte_level())
      throw TokenizerError("pre_tokenizer: no ByteLevel step (only byte-level BPE is supported)");
    check_decoder(j.value("decoder", nlohmann::json()));

    // Per-id tables: model vocabulary first, then added tokens (which may reuse model ids).
    const auto& vocab_text = im.model.id_to_text();
    std::size_t size = vocab_text.size();
    std::vector<AddedToken> added;
    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      if (!j["added_tokens"].is_array()) throw TokenizerError("\"added_tokens\" must be a list");
      for (const auto& a : j["added_tokens"]) {
        if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
            !a.contains("content") || !a["content"].is_string())
          throw TokenizerError("added_tokens: each entry needs an integer \"id\" and a string "
                               "\"content\", got " + a.dump());
        const int64_t id = a["id"].get<int64_t>();
        if (id < 0 || id > (int64_t{1} << 30))
          throw TokenizerError("added_tokens: id out of range: " + a.dump());
        AddedToken tok;
        tok.id = static_cast<int32_t>(id);
        tok.content = a["content"].get<std::string>();
        tok.special = flag(a, "special", false);
        tok.normalized = flag(a, "normalized", !tok.special);
        tok.lstrip = flag(a, "lstrip", false);
        tok.rstrip = flag(a, "rstrip", false);
        tok.single_word = flag(a, "single_word", false);
        size = std::max(size, static_cast<std::size_t>(id) + 1);
        added.push_back(std::move(tok));
      }
    }
    im.id_text.assign(size, std::string());
    im.id_bytes.assign(size, std::string());
    im.id_flags.assign(size, 0);
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
    for (std::size_t id = 0; id < vocab_text.size(); ++id) {
      if (vocab_text[id].empty()) continue;
      im.id_text[id] = vocab_text[id];
      im.id_bytes[id] = alphabet.token_bytes(vocab_text[id]);
      im.id_flags[id] = Impl::kKnown;
    }
    for (AddedToken& tok : added) {
      const auto id = static_cast<std::size_t>(tok.id);
      im.id_text[id] = tok.content;
      im.id_bytes[id] = alphabet.token_bytes(tok.content);
      im.id_flags[id] = Impl::kKnown | Impl::kAdded | (tok.special ? Impl::kSpecial : 0);
      im.added_index.emplace(tok.content, tok.id);
      std::string normalized_content;
      if (tok.normalized) {
        if (!utf8::is_valid(tok.content))
          throw TokenizerError("added_tokens: content is not valid UTF-8");
        normalized_content = std::string(im.normalizer.apply(tok.content, normalized_content));
      }
      im.added.add(std::move(tok), std::move(normalized_content));
    }
  } catch (const TokenizerError& e) {
    throw TokenizerError(origin + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(origin + ": unexpected JSON content: " + e.what());
  }
  return t;
}

void Tokenizer::Impl::encode_plain(std::string_view text, bool allow_special,
                                   std::vector<int32_t>& out) const {
  std::string normalized_storage;
  const std::string_view normalized = normalizer.apply(text, normalized_storage);
  std::vector<Segment> segments;
  added.split_normalized(normalized, allow_special, segments);
  Pieces pieces;
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      out.push_back(seg.id);
      continue;
    }
    pieces.views.clear();
    pieces.owned.clear();
    pre_tokenizer.split(seg.text, pieces);
    for (const std::string_view piece : pieces.views) model.encode_piece(piece, out);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::string valid_storage;
  if (!utf8::is_valid(text)) {
    valid_storage = utf8::lossy(text);
    text = valid_storage;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  std::vector<Segment> segments;
  impl_->added.split_raw(text, allow_special, segments);
  for (const Segment& seg : segments) {
    if (seg.id >= 0)
      out.push_back(seg.id);
    else
      impl_->encode_plain(seg.text, allow_special, out);
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  const Impl& im = *impl_;
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= im.id_flags.size()) continue;
    const uint8_t f = im.id_flags[static_cast<std::size_t>(id)];
    if (!(f & Impl::kKnown) || (skip_special && (f & Impl::kSpecial))) continue;
    bytes += im.id_bytes[static_cast<std::size_t>(id)];
  }
  if (utf8::is_valid(bytes)) return bytes;
  return utf8::lossy(bytes);
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_flags.size()); }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  const auto it = impl_->added_index.find(token);
  if (it != impl_->added_index.end()) return it->second;
  return impl_->model.token_id(token);
}

std::string_view Tokenizer::token_text(int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_text.size()) return {};
  return impl_->id_text[static_cast<std::size_t>(id)];
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_bytes.size()) return {};
  return impl_->id_bytes[static_cast<std::size_t>(id)];
}

bool Tokenizer::is_special(int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_flags.size()) return false;
  return impl_->id_flags[static_cast<std::size_t>(id)] & Impl::kSpecial;
}

bool Tokenizer::is_added(int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_flags.size()) return false;
  return impl_->id_flags[static_cast<std::size_t>(id)] & Impl::kAdded;
}

std::vector<Tokenizer::AddedTokenInfo> Tokenizer::added_tokens() const {
  std::vector<AddedTokenInfo> out;
  for (const AddedToken& t : impl_->added.tokens()) out.push_back({t.id, t.content, t.special});
  return out;
}

}  // namespace ds::tok
