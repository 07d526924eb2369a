// Tokenizer: an HF tokenizer.json of the byte-level BPE kind (Qwen3, Qwen3.5/3.6, Llama 3,
// GPT-2 ...), producing exactly the ids HF tokenizers produces, and back.
//
// Encoding, as HF does it:
//   1. added tokens (<|im_start|>, <think>, ...) are cut out of the text first, literally
//      (added_vocabulary.h; special ones only when allow_special is true);
//   2. each remaining run is normalized (normalizer.h; NFC for Qwen);
//   3. and cut into pieces by the pre-tokenizer (pre_tokenizer.h; the Split regex from the
//      file, run with PCRE2);
//   4. each piece is encoded by BPE over its bytes (bpe_model.h), with a cache.
// Nothing about a particular model is built in: regex, vocabulary, merges and added tokens all
// come from the file. The post-processor is not applied: the Qwen family's adds nothing, and
// chat prompts are encoded without it (HF's apply_chat_template uses add_special_tokens=False).
// Text that is not valid UTF-8 is first made valid by replacing each ill-formed sequence with
// U+FFFD (see utf8.h), so encode() accepts any bytes and never throws.
//
// Decoding concatenates the tokens' bytes (byte_level.h; unknown ids are skipped, special
// tokens too when skip_special is true) and converts the result to text the way HF's decode
// does: each invalid or truncated UTF-8 sequence becomes U+FFFD. For streaming use
// IncrementalDetokenizer (incremental_detokenizer.h).
//
// A Tokenizer is immutable after load() and safe to use from many threads at once (the BPE
// cache is internally synchronised). It is move-only; load it once and share it by reference.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer/tokenizer_error.h"

namespace ds::tok {

class Tokenizer {
 public:
  // Loads `path`: a model directory (its tokenizer.json is read) or a tokenizer.json file.
  // Throws TokenizerError naming the file for a missing/unreadable file, bad JSON, or a
  // tokenizer of a kind this class does not implement (e.g. a WordPiece or Unigram model, a
  // SentencePiece-style decoder).
  static Tokenizer load(const std::string& model_dir_or_tokenizer_json);
  // Builds from the text of a tokenizer.json; `origin` names it in error messages.
  static Tokenizer from_json_text(std::string_view json_text, const std::string& origin);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text`. With allow_special=false, special added tokens spelled in the text
  // are encoded as plain text (HF's encode_special_tokens); other added tokens still match.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;

  // Text of `ids` (lossy UTF-8, as HF). skip_special drops tokens flagged special.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // 1 + the highest id the tokenizer knows (vocabulary and added tokens). A model's embedding
  // table may have more rows than this (padding rows); such ids decode to nothing.
  int32_t vocab_size() const;

  // The id of a token given its spelling in tokenizer.json ("Ġthe", "<|im_end|>").
  std::optional<int32_t> token_id(std::string_view token) const;
  // The spelling of a token in tokenizer.json; empty for an unknown id.
  std::string_view token_text(int32_t id) const;
  // The bytes a token contributes to decoded text (may be partial UTF-8); empty if unknown.
  std::string_view token_bytes(int32_t id) const;
  // True for added tokens flagged "special" (the ones skip_special drops).
  bool is_special(int32_t id) const;
  // True for any added token (special or not).
  bool is_added(int32_t id) const;
  // Every added token as (id, content, special), in file order.
  struct AddedTokenInfo {
    int32_t id;
    std::string content;
    bool special;
  };
  std::vector<AddedTokenInfo> added_tokens() const;

 private:
  Tokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::tok
