// compile() and the per-state mask precomputation (compiler.h).
#include "model/grammar/compiler.h"

#include <algorithm>
#include <chrono>

#include "model/grammar/trie_walk.h"

namespace ds::grammar {
namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Setting bits one by one costs about what OR-ing a whole bitmask costs once the list is a
// quarter as long as the bitmask has words.
StateMask make_mask(std::vector<int32_t>& accepted, const TokenVocabulary& vocab) {
  StateMask m;
  const size_t a = accepted.size();
  const size_t r = static_cast<size_t>(vocab.num_text_tokens()) - a;
  const size_t list_limit = static_cast<size_t>(vocab.mask_words()) / 4;
  if (a <= r && a <= list_limit) {
    m.kind = StateMask::Kind::accept_list;
    m.tokens = std::move(accepted);
  } else if (r < a && r <= list_limit) {
    m.kind = StateMask::Kind::reject_list;
    std::vector<uint32_t> bits(static_cast<size_t>(vocab.mask_words()), 0);
    for (int32_t t : accepted) bits[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
    const std::vector<uint32_t>& text = vocab.text_mask();
    for (size_t w = 0; w < bits.size(); ++w) {
      uint32_t rejected = text[w] & ~bits[w];
      while (rejected) {
        const int b = __builtin_ctz(rejected);
        m.tokens.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(b)));
        rejected &= rejected - 1;
      }
    }
  } else {
    m.kind = StateMask::Kind::bitmask;
    m.bits.assign(static_cast<size_t>(vocab.mask_words()), 0);
    for (int32_t t : accepted) m.bits[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
  }
  return m;
}

}  // namespace

std::shared_ptr<const CompiledGrammar> compile(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocab) {
  if (!vocab) throw GrammarError("grammar: no vocabulary");
  auto out = std::shared_ptr<CompiledGrammar>(new CompiledGrammar());
  const auto t0 = std::chrono::steady_clock::now();
  out->pda_ = build_pda(grammar);
  out->vocab_ = std::move(vocab);
  const Pda& pda = out->pda_;
  const TokenTrie& trie = out->vocab_->trie();
  out->stats_.pda_seconds = since(t0);

  const auto t1 = std::chrono::steady_clock::now();
  // Escapes from the root rule lead to the end of the grammar, where nothing can follow,
  // unless something calls the root.
  bool root_called = false;
  for (const PdaCall& c : pda.calls) root_called = root_called || c.rule == pda.root;

  const std::vector<int32_t> cls = mask_classes(pda, trie.max_depth + 1);
  // Indexed by class * 2 + keep_escapes: states of one class may sit in rules that differ in
  // whether escapes matter.
  int32_t num_cls = 0;
  for (int32_t c : cls) num_cls = std::max(num_cls, c + 1);
  std::vector<int32_t> mask_of_class(2 * static_cast<size_t>(num_cls), -1);
  out->mask_of_.assign(pda.num_states(), -1);
  TrieWalker walker(pda, trie);
  FramePool pool;
  std::vector<int32_t> accepted;
  for (size_t s = 0; s < pda.num_states(); ++s) {
    const PdaState& st = pda.states[s];
    if (!st.reads) continue;
    ++out->stats_.reading_states;
    const bool keep_escapes = st.rule != pda.root || root_called;
    int32_t& shared = mask_of_class[2 * static_cast<size_t>(cls[s]) + (keep_escapes ? 1 : 0)];
    if (shared >= 0) {
      out->mask_of_[s] = shared;
      continue;
    }
    accepted.clear();
    StateMask escapes_only;
    pool.clear();
    const Top start{static_cast<int32_t>(s), 0};
    walker.walk(
        0, trie.size(), 0, std::span<const Top>(&start, 1), pool,
        [&](int32_t node) {
          for (int32_t k = trie.first[static_cast<size_t>(node)]; k < trie.first[static_cast<size_t>(node) + 1]; ++k)
            accepted.push_back(trie.ids[static_cast<size_t>(k)]);
        },
        [&](int32_t node) {
          if (keep_escapes) escapes_only.escapes.push_back(node);
        });
    StateMask m = make_mask(accepted, *out->vocab_);
    m.escapes = std::move(escapes_only.escapes);
    out->stats_.escape_nodes += static_cast<int64_t>(m.escapes.size());
    out->stats_.mask_bytes += static_cast<int64_t>((m.tokens.size() + m.escapes.size()) * sizeof(int32_t) +
                                                   m.bits.size() * sizeof(uint32_t));
    shared = static_cast<int32_t>(out->masks_.size());
    out->mask_of_[s] = shared;
    out->masks_.push_back(std::move(m));
  }
  out->stats_.rules = static_cast<int32_t>(pda.rule_start.size());
  out->stats_.states = static_cast<int32_t>(pda.num_states());
  out->stats_.masks = static_cast<int32_t>(out->masks_.size());
  out->stats_.mask_seconds = since(t1);
  return out;
}

}  // namespace ds::grammar
