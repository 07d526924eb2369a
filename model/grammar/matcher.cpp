// GrammarMatcher (matcher.h).
#include "model/grammar/matcher.h"

#include <algorithm>
#include <cstring>

namespace ds::grammar {
namespace {

// More stacks than this at one position means a grammar far more ambiguous than any real
// constraint: the matcher refuses to go on (the request fails) rather than slow every step of
// the engine.
constexpr size_t kMaxTops = 4096;

inline void set_bit(std::span<uint32_t> mask, int32_t t) { mask[static_cast<size_t>(t) / 32] |= 1u << (t % 32); }
inline void clear_bit(std::span<uint32_t> mask, int32_t t) {
  mask[static_cast<size_t>(t) / 32] &= ~(1u << (t % 32));
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::vector<int32_t> end_tokens)
    : grammar_(std::move(grammar)), end_tokens_(std::move(end_tokens)),
      walker_(grammar_->pda(), grammar_->vocabulary().trie()) {
  std::sort(end_tokens_.begin(), end_tokens_.end());
  end_tokens_.erase(std::unique(end_tokens_.begin(), end_tokens_.end()), end_tokens_.end());
  const int32_t size = grammar_->vocabulary().size();
  end_tokens_.erase(std::remove_if(end_tokens_.begin(), end_tokens_.end(), [&](int32_t t) { return t < 0 || t >= size; }),
                    end_tokens_.end());
  const Top start{grammar_->pda().start(), 0};
  bool bottom = false;
  try {
    bottom = walker_.stepper().close(std::span<const Top>(&start, 1), pool_, scratch_a_);
  } catch (const GrammarError&) {
    scratch_a_.clear();  // stuck from the start: the mask allows nothing, the request fails
  }
  push(scratch_a_, bottom, false);
}

bool GrammarMatcher::is_end_token(int32_t t) const {
  return std::binary_search(end_tokens_.begin(), end_tokens_.end(), t);
}

void GrammarMatcher::push(std::span<const Top> tops, bool can_end, bool finished) {
  Entry e;
  e.begin = static_cast<uint32_t>(tops_.size());
  e.count = static_cast<uint32_t>(tops.size());
  e.can_end = can_end;
  e.finished = finished;
  tops_.insert(tops_.end(), tops.begin(), tops.end());
  history_.push_back(e);
}

bool GrammarMatcher::read(std::string_view bytes) {
  if (bytes.empty()) return false;
  scratch_a_.assign(tops().begin(), tops().end());
  bool bottom = false;
  try {
    for (size_t i = 0; i < bytes.size(); ++i) {
      bottom = walker_.stepper().advance(scratch_a_, static_cast<uint8_t>(bytes[i]), pool_, scratch_b_);
      scratch_a_.swap(scratch_b_);
      // Past the bottom nothing can be read; an empty configuration is only fine at the end.
      if (scratch_a_.empty() && (i + 1 < bytes.size() || !bottom)) return false;
      if (scratch_a_.size() > kMaxTops) return false;
    }
  } catch (const GrammarError&) {
    return false;  // a closure without bound: refused like any token the grammar cannot read
  }
  push(scratch_a_, bottom, false);
  return true;
}

bool GrammarMatcher::accept_token(int32_t token) {
  if (is_finished()) {
    if (!is_end_token(token)) return false;
    push({}, true, true);
    return true;
  }
  if (is_end_token(token) && can_end()) {
    push({}, true, true);
    return true;
  }
  if (!grammar_->vocabulary().is_text(token)) return false;
  return read(grammar_->vocabulary().bytes(token));
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (is_finished()) return false;
  return read(bytes);
}

void GrammarMatcher::rollback(int32_t n) {
  if (n < 0 || n > num_tokens()) throw GrammarError("grammar: cannot roll back " + std::to_string(n) + " tokens");
  for (int32_t i = 0; i < n; ++i) {
    tops_.resize(history_.back().begin);
    history_.pop_back();
  }
}

void GrammarMatcher::fill_next_token_bitmask(std::span<uint32_t> mask) {
  const TokenVocabulary& vocab = grammar_->vocabulary();
  const size_t words = static_cast<size_t>(vocab.mask_words());
  if (mask.size() < words) throw GrammarError("grammar: token bitmask too small for the vocabulary");
  std::span<uint32_t> out = mask.first(words);
  const Entry entry = history_.back();
  auto add_end_tokens = [&] {
    for (int32_t t : end_tokens_) set_bit(out, t);
  };
  if (entry.finished) {
    std::fill(out.begin(), out.end(), 0u);
    add_end_tokens();
    return;
  }
  try {
    fill_text_tokens(out);
  } catch (const GrammarError&) {
    std::fill(out.begin(), out.end(), 0u);  // see read(): nothing but an end can follow
  }
  if (entry.can_end) add_end_tokens();
}

void GrammarMatcher::fill_text_tokens(std::span<uint32_t> out) {
  const TokenVocabulary& vocab = grammar_->vocabulary();
  const size_t words = out.size();
  const std::vector<uint32_t>& text = vocab.text_mask();
  // Copy the tops: escape walks may grow the frame pool, never the history.
  scratch_a_.assign(tops().begin(), tops().end());
  // The first top with a dense mask (a bitmask, or every text token but a reject list)
  // initialises the output in one pass; every other top is OR-ed in.
  const Top* base = nullptr;
  for (const Top& t : scratch_a_) {
    const StateMask::Kind k = grammar_->mask(t.state).kind;
    if (k == StateMask::Kind::bitmask || k == StateMask::Kind::reject_list) {
      base = &t;
      break;
    }
  }
  if (base) {
    const StateMask& m = grammar_->mask(base->state);
    if (m.kind == StateMask::Kind::bitmask) {
      std::memcpy(out.data(), m.bits.data(), words * sizeof(uint32_t));
    } else {
      std::memcpy(out.data(), text.data(), words * sizeof(uint32_t));
      for (int32_t tok : m.tokens) clear_bit(out, tok);
    }
  } else {
    std::fill(out.begin(), out.end(), 0u);
  }
  for (const Top& t : scratch_a_) {
    if (&t == base) continue;
    const StateMask& m = grammar_->mask(t.state);
    switch (m.kind) {
      case StateMask::Kind::accept_list:
        for (int32_t tok : m.tokens) set_bit(out, tok);
        break;
      case StateMask::Kind::bitmask:
        for (size_t w = 0; w < words; ++w) out[w] |= m.bits[w];
        break;
      case StateMask::Kind::reject_list:
        temp_.assign(text.begin(), text.end());
        for (int32_t tok : m.tokens) clear_bit(temp_, tok);
        for (size_t w = 0; w < words; ++w) out[w] |= temp_[w];
        break;
    }
  }
  const TokenTrie& trie = vocab.trie();
  for (const Top& t : scratch_a_) {
    const StateMask& m = grammar_->mask(t.state);
    if (m.escapes.empty() || t.frame == 0) continue;
    // The caller's configuration once this rule has ended.
    const Frame& f = pool_.at(t.frame);
    const Top resume{f.ret, f.parent};
    walker_.stepper().close(std::span<const Top>(&resume, 1), pool_, scratch_b_);
    if (scratch_b_.empty()) continue;
    caller_.assign(scratch_b_.begin(), scratch_b_.end());
    for (int32_t node : m.escapes) {
      walker_.walk(
          node + 1, trie.end[static_cast<size_t>(node)], trie.depth[static_cast<size_t>(node)], caller_, pool_,
          [&](int32_t n) {
            for (int32_t k = trie.first[static_cast<size_t>(n)]; k < trie.first[static_cast<size_t>(n) + 1]; ++k)
              set_bit(out, trie.ids[static_cast<size_t>(k)]);
          },
          [](int32_t) {});
    }
  }
}

}  // namespace ds::grammar
