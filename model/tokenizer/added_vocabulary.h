// Added tokens (tokenizer.json "added_tokens"): control tokens such as <|im_start|> and extra
// tokens such as <think>, matched literally in the text before any pre-tokenization.
//
// HF's rules, which this follows:
//  * Tokens flagged normalized=false are searched in the raw text first; the text between
//    them is normalized, and then tokens flagged normalized=true (compared in normalized
//    form) are searched in that.
//  * Search is leftmost-longest: the earliest match wins, and the longest token among those
//    starting there.
//  * single_word: a match touching a word character (alphanumeric or '_') on either side is
//    ignored. lstrip / rstrip: whitespace before / after the match is absorbed into it.
//  * With allow_special=false, tokens flagged special are not matched (their text is encoded
//    as ordinary text); other added tokens still are.
// Matching walks a byte trie from each position whose first byte can start a token, so the
// cost is proportional to the text times the length of the longest partial match.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds::tok {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A segment of split text: either an added token's id or a run of plain text.
struct Segment {
  std::string_view text;  // the plain text (empty for a token)
  int32_t id = -1;        // >= 0 for a token
};

class TokenTrie {
 public:
  // Adds `content` (non-empty) for the token at `index` of the caller's token list.
  void add(std::string_view content, int32_t index);
  bool empty() const { return nodes_.size() <= 1; }

  // Leftmost-longest search from byte `from`: the start, end and token index of the first
  // match whose token is accepted by `accept`, if any.
  template <class Accept>
  bool find(std::string_view text, std::size_t from, Accept&& accept, std::size_t& start,
            std::size_t& end, int32_t& index) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;
  };
  int32_t child(int32_t node, unsigned char b) const;
  std::vector<Node> nodes_{Node{}};
  bool first_byte_[256] = {};
};

class AddedVocabulary {
 public:
  void add(AddedToken token, std::string normalized_content);
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

  // Splits raw text on tokens with normalized=false.
  void split_raw(std::string_view text, bool allow_special, std::vector<Segment>& out) const;
  // Splits normalized text on tokens with normalized=true.
  void split_normalized(std::string_view text, bool allow_special,
                        std::vector<Segment>& out) const;

 private:
  void split(const TokenTrie& trie, std::string_view text, bool allow_special,
             std::vector<Segment>& out) const;
  std::vector<AddedToken> tokens_;
  TokenTrie raw_trie_;
  TokenTrie normalized_trie_;
};

}  // namespace ds::tok
