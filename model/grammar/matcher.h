// GrammarMatcher: one request's position in a compiled grammar, advanced token by token.
//
// fill_next_token_bitmask() writes which tokens may come next as a bitmask over the whole
// vocabulary (bit t of word t / 32): for each stack top, the state's precomputed mask
// (compiler.h), plus the escape nodes resolved against the top's real caller, plus the end
// tokens when the grammar can end here. accept_token() reads a token's bytes (a token may
// span several grammar symbols, or stop in the middle of a UTF-8 character) or, for an end
// token, finishes. rollback() undoes tokens, for speculative decoding's rejected drafts.
//
// End tokens (the model's eos ids and the request's stop_token_ids) are allowed exactly when
// the grammar can end; once one is accepted the matcher is finished and only end tokens stay
// allowed (a request that ignores eos keeps generating them until its length limit). Special
// tokens that are not end tokens are never allowed.
//
// A matcher is single-threaded and owns its stacks; the CompiledGrammar is shared. It never
// throws while it runs: a grammar so ambiguous that its stacks grow without bound refuses the
// token (and the mask then allows only what can end), so one request's constraint can fail
// that request, never the engine's step.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "model/grammar/compiler.h"
#include "model/grammar/stack.h"
#include "model/grammar/trie_walk.h"

namespace ds::grammar {

class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::vector<int32_t> end_tokens);

  // mask.size() >= vocabulary().mask_words(); words past them are left alone.
  void fill_next_token_bitmask(std::span<uint32_t> mask);
  // False, leaving the matcher unchanged, when `token` may not come next.
  bool accept_token(int32_t token);
  // Reads raw bytes as if they were one token (tests, forced text). False, unchanged, when
  // the grammar cannot read them.
  bool accept_bytes(std::string_view bytes);
  // Undoes the last n accepted tokens (n <= num_tokens()).
  void rollback(int32_t n);

  bool can_end() const { return history_.back().can_end; }
  bool is_finished() const { return history_.back().finished; }
  // Nothing but an end token can come next.
  bool must_end() const { return is_finished() || (can_end() && tops().empty()); }
  int32_t num_tokens() const { return static_cast<int32_t>(history_.size()) - 1; }
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  struct Entry {
    uint32_t begin, count;  // into tops_
    bool can_end = false;
    bool finished = false;
  };
  std::span<const Top> tops() const {
    const Entry& e = history_.back();
    return {tops_.data() + e.begin, e.count};
  }
  bool is_end_token(int32_t t) const;
  bool read(std::string_view bytes);
  // The text tokens the current tops allow, into `out` (one word per 32 tokens).
  void fill_text_tokens(std::span<uint32_t> out);
  void push(std::span<const Top> tops, bool can_end, bool finished);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::vector<int32_t> end_tokens_;  // sorted
  FramePool pool_;
  TrieWalker walker_;
  std::vector<Top> tops_;  // every history entry's tops, in order
  std::vector<Entry> history_;
  std::vector<Top> scratch_a_, scratch_b_, caller_;
  std::vector<uint32_t> temp_;
};

}  // namespace ds::grammar
