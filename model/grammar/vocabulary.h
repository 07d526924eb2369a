// TokenVocabulary: what the grammar engine knows of a model's tokens: the bytes each one
// adds to the output, and which ones are special (never text: a grammar never produces them;
// the stop tokens are allowed separately, exactly when the grammar can end).
//
// The tokens that are text are laid out as a byte trie in preorder (TokenTrie), which is how
// every token mask is computed: walking the trie with the automaton, a byte the automaton
// cannot read rules out every token below it at once, and tokens sharing a prefix share the
// work of reading it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ds::tok {
class Tokenizer;
}

namespace ds::grammar {

// Preorder byte trie of the text tokens. Node i (0-based, the root is implicit) reads byte
// `byte[i]` at depth `depth[i]` (1 = the first byte of a token); its subtree is [i, end[i]);
// the tokens spelled exactly by the path to i are ids[first[i], first[i + 1]).
struct TokenTrie {
  std::vector<uint8_t> byte;
  std::vector<uint16_t> depth;
  std::vector<int32_t> end;
  std::vector<int32_t> first;  // size nodes + 1
  std::vector<int32_t> ids;
  int32_t max_depth = 0;

  int32_t size() const { return static_cast<int32_t>(byte.size()); }
};

class TokenVocabulary {
 public:
  // size: the width of a logits row (the model's vocabulary, which may have more rows than
  // the tokenizer has tokens). token_bytes[i] is token i's text; ids without text (empty
  // bytes, ids beyond token_bytes, special ones) are never produced by a grammar.
  TokenVocabulary(int32_t size, std::vector<std::string> token_bytes, const std::vector<int32_t>& special_ids);

  static std::shared_ptr<const TokenVocabulary> from_tokenizer(const tok::Tokenizer& tokenizer, int32_t size);

  int32_t size() const { return size_; }
  // Words of a bitmask over the vocabulary (bit t of word t / 32 = token t).
  int32_t mask_words() const { return (size_ + 31) / 32; }
  std::string_view bytes(int32_t id) const;
  bool is_text(int32_t id) const;
  const TokenTrie& trie() const { return trie_; }
  // Every text token, as a bitmask of mask_words() words.
  const std::vector<uint32_t>& text_mask() const { return text_mask_; }
  int32_t num_text_tokens() const { return num_text_; }

 private:
  int32_t size_;
  std::vector<std::string> bytes_;
  std::vector<bool> text_;
  std::vector<uint32_t> text_mask_;
  int32_t num_text_ = 0;
  TokenTrie trie_;
};

}  // namespace ds::grammar
