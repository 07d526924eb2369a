#include "model/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "model/tokenizer/unicode_props.h"
#include "model/tokenizer/utf8.h"

namespace ds::tok {
namespace {

// The code point that ends just before byte `pos` of valid UTF-8 `s` (pos > 0).
char32_t code_point_before(std::string_view s, std::size_t pos) {
  std::size_t b = pos - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
  char32_t cp = 0;
  return utf8::decode_one(s, b, cp) ? cp : 0;
}

char32_t code_point_at(std::string_view s, std::size_t pos) {
  char32_t cp = 0;
  return utf8::decode_one(s, pos, cp) ? cp : 0;
}

}  // namespace

int32_t TokenTrie::child(int32_t node, unsigned char b) const {
  const auto& ch = nodes_[static_cast<std::size_t>(node)].children;
  const auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t{-1}));
  return (it != ch.end() && it->first == b) ? it->second : -1;
}

void TokenTrie::add(std::string_view content, int32_t index) {
  int32_t node = 0;
  for (const char c : content) {
    const auto b = static_cast<unsigned char>(c);
    int32_t next = child(node, b);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& ch = nodes_[static_cast<std::size_t>(node)].children;
      ch.insert(std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t{-1})),
                {b, next});
    }
    node = next;
  }
  // The first token added with a given content keeps it (HF keeps the first as well).
  if (nodes_[static_cast<std::size_t>(node)].token < 0)
    nodes_[static_cast<std::size_t>(node)].token = index;
  first_byte_[static_cast<unsigned char>(content[0])] = true;
}

template <class Accept>
bool TokenTrie::find(std::string_view text, std::size_t from, Accept&& accept,
                     std::size_t& start, std::size_t& end, int32_t& index) const {
  const std::size_t n = text.size();
  for (std::size_t pos = from; pos < n; ++pos) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) continue;
    int32_t node = 0;
    int32_t best = -1;
    std::size_t best_end = 0;
    for (std::size_t i = pos; i < n; ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      const int32_t tok = nodes_[static_cast<std::size_t>(node)].token;
      if (tok >= 0 && accept(tok)) {
        best = tok;
        best_end = i + 1;
      }
    }
    if (best >= 0) {
      start = pos;
      end = best_end;
      index = best;
      return true;
    }
  }
  return false;
}

void AddedVocabulary::add(AddedToken token, std::string normalized_content) {
  if (token.content.empty()) return;
  const auto index = static_cast<int32_t>(tokens_.size());
  if (token.normalized) {
    if (!normalized_content.empty()) normalized_trie_.add(normalized_content, index);
  } else {
    raw_trie_.add(token.content, index);
  }
  tokens_.push_back(std::move(token));
}

void AddedVocabulary::split_raw(std::string_view text, bool allow_special,
                                std::vector<Segment>& out) const {
  split(raw_trie_, text, allow_special, out);
}

void AddedVocabulary::split_normalized(std::string_view text, bool allow_special,
                                       std::vector<Segment>& out) const {
  split(normalized_trie_, text, allow_special, out);
}

void AddedVocabulary::split(const TokenTrie& trie, std::string_view text, bool allow_special,
                            std::vector<Segment>& out) const {
  if (trie.empty()) {
    if (!text.empty()) out.push_back({text, -1});
    return;
  }
  std::size_t emitted = 0;  // text before this offset has been emitted
  std::size_t search = 0;
  std::size_t start, end;
  int32_t index;
  const auto any = [](int32_t) { return true; };
  while (search < text.size() && trie.find(text, search, any, start, end, index)) {
    search = end;
    const AddedToken& tok = tokens_[static_cast<std::size_t>(index)];
    if (start < emitted) continue;  // overlaps what an rstrip already absorbed
    if (tok.special && !allow_special) continue;
    if (tok.single_word) {
      const bool left_ok = start == 0 || !unicode::is_word_char(code_point_before(text, start));
      const bool right_ok =
          end == text.size() || !unicode::is_word_char(code_point_at(text, end));
      if (!left_ok || !right_ok) continue;
    }
    std::size_t b = start, e = end;
    if (tok.lstrip) {
      while (b > emitted && unicode::is_white_space(code_point_before(text, b))) {
        --b;
        while (b > emitted && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
      }
    }
    if (tok.rstrip) {
      while (e < text.size()) {
        char32_t cp = 0;
        const std::size_t len = utf8::decode_one(text, e, cp);
        if (!len || !unicode::is_white_space(cp)) break;
        e += len;
      }
      search = std::max(search, e);
    }
    if (b > emitted) out.push_back({text.substr(emitted, b - emitted), -1});
    out.push_back({std::string_view(), tok.id});
    emitted = e;
  }
  if (emitted < text.size()) out.push_back({text.substr(emitted), -1});
}

}  // namespace ds::tok
