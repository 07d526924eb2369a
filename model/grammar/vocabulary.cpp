// TokenVocabulary and its preorder trie (vocabulary.h).
#include "model/grammar/vocabulary.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "model/grammar/grammar.h"
#include "model/tokenizer/tokenizer.h"

namespace ds::grammar {

TokenVocabulary::TokenVocabulary(int32_t size, std::vector<std::string> token_bytes,
                                 const std::vector<int32_t>& special_ids)
    : size_(size), bytes_(std::move(token_bytes)) {
  if (size <= 0) throw GrammarError("grammar: empty vocabulary");
  if (bytes_.size() > static_cast<size_t>(size)) bytes_.resize(static_cast<size_t>(size));
  text_.assign(static_cast<size_t>(size), false);
  for (size_t i = 0; i < bytes_.size(); ++i) text_[i] = !bytes_[i].empty();
  for (int32_t id : special_ids)
    if (id >= 0 && id < size) text_[static_cast<size_t>(id)] = false;
  text_mask_.assign(static_cast<size_t>(mask_words()), 0);
  std::vector<int32_t> order;
  for (int32_t i = 0; i < size; ++i)
    if (text_[static_cast<size_t>(i)]) {
      order.push_back(i);
      text_mask_[static_cast<size_t>(i) / 32] |= 1u << (i % 32);
    }
  num_text_ = static_cast<int32_t>(order.size());
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)]; });

  // Preorder: walking the sorted tokens, a token adds one node per byte past the prefix it
  // shares with the previous token. `open[d]` is the node at depth d + 1 on the current path.
  TokenTrie& t = trie_;
  std::vector<int32_t> open;
  std::string_view prev;
  for (int32_t id : order) {
    const std::string& s = bytes_[static_cast<size_t>(id)];
    if (s.size() > 65535) throw GrammarError("grammar: a token longer than 65535 bytes");
    size_t common = 0;
    while (common < prev.size() && common < s.size() && prev[common] == s[common]) ++common;
    // Close the nodes below the shared prefix.
    while (open.size() > common) {
      t.end[static_cast<size_t>(open.back())] = t.size();
      open.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      open.push_back(t.size());
      t.byte.push_back(static_cast<uint8_t>(s[d]));
      t.depth.push_back(static_cast<uint16_t>(d + 1));
      t.end.push_back(-1);
      t.first.push_back(static_cast<int32_t>(t.ids.size()));
    }
    // The token ends at the deepest open node; equal spellings share it (sorted together).
    t.ids.push_back(id);
    t.max_depth = std::max(t.max_depth, static_cast<int32_t>(s.size()));
    prev = s;
  }
  while (!open.empty()) {
    t.end[static_cast<size_t>(open.back())] = t.size();
    open.pop_back();
  }
  // first[i] was recorded when node i was created, before its own token was appended, so
  // ids[first[i], first[i + 1]) are exactly the tokens ending at i.
  t.first.push_back(static_cast<int32_t>(t.ids.size()));
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(const tok::Tokenizer& tokenizer, int32_t size) {
  const int32_t n = std::min(size, tokenizer.vocab_size());
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<int32_t> special;
  for (int32_t i = 0; i < n; ++i) {
    bytes[static_cast<size_t>(i)] = std::string(tokenizer.token_bytes(i));
    if (tokenizer.is_special(i)) special.push_back(i);
  }
  return std::make_shared<const TokenVocabulary>(size, std::move(bytes), special);
}

std::string_view TokenVocabulary::bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) return {};
  return bytes_[static_cast<size_t>(id)];
}

bool TokenVocabulary::is_text(int32_t id) const { return id >= 0 && id < size_ && text_[static_cast<size_t>(id)]; }

}  // namespace ds::grammar
