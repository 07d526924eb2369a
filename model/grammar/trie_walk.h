// TrieWalker: which tokens a set of stacks can read, found by walking the vocabulary's trie.
//
// walk() visits the trie nodes of [begin, end) in preorder, moving the configuration of the
// parent node (depth - 1) by the node's byte. A node the configuration cannot read prunes its
// whole subtree. Two things are reported per node:
//  * accepted: the token(s) spelled by the path to the node can be read entirely: some stack
//    is still alive, or the bottom frame was popped exactly at the node's last byte;
//  * escaped: the bottom frame was popped at this node and the node has children, so longer
//    tokens continue in whatever lies below the bottom. At run time the bottom is the end of
//    the grammar (nothing can follow); when masks are precomputed it is the unknown caller of
//    the rule being examined, and the escape is resolved later against the real stack.
// The same walk serves compilation (the whole trie from one state) and the matcher (the
// children of an escape node from the real caller's configuration).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/grammar/pda.h"
#include "model/grammar/stack.h"
#include "model/grammar/vocabulary.h"

namespace ds::grammar {

class TrieWalker {
 public:
  TrieWalker(const Pda& pda, const TokenTrie& trie)
      : pda_(pda), trie_(trie), stepper_(pda), cfg_(static_cast<size_t>(trie.max_depth) + 1),
        single_(static_cast<size_t>(trie.max_depth) + 1, -1) {}

  // Walks nodes [begin, end), whose shallowest nodes are at depth base + 1, from `start`
  // (the configuration at depth base). on_accept(node), on_escape(node).
  template <class Accept, class Escape>
  void walk(int32_t begin, int32_t end, int32_t base, std::span<const Top> start, FramePool& pool, Accept&& on_accept,
            Escape&& on_escape) {
    if (!pda_.has_calls && start.size() == 1 && start[0].frame == 0) {
      walk_single(begin, end, base, start[0].state, on_accept, on_escape);
      return;
    }
    cfg_[static_cast<size_t>(base)].assign(start.begin(), start.end());
    for (int32_t i = begin; i < end;) {
      const size_t d = trie_.depth[static_cast<size_t>(i)];
      std::vector<Top>& here = cfg_[d];
      const bool bottom = stepper_.advance(cfg_[d - 1], trie_.byte[static_cast<size_t>(i)], pool, here);
      const bool alive = !here.empty();
      if (!alive && !bottom) {
        i = trie_.end[static_cast<size_t>(i)];
        continue;
      }
      if (trie_.first[static_cast<size_t>(i)] < trie_.first[static_cast<size_t>(i) + 1]) on_accept(i);
      if (bottom && trie_.end[static_cast<size_t>(i)] > i + 1) on_escape(i);
      i = alive ? i + 1 : trie_.end[static_cast<size_t>(i)];
    }
  }

  Stepper& stepper() { return stepper_; }

 private:
  // A Pda without calls from one state: the configuration is one state or nothing, and the
  // bottom is popped exactly at final states.
  template <class Accept, class Escape>
  void walk_single(int32_t begin, int32_t end, int32_t base, int32_t state, Accept& on_accept, Escape& on_escape) {
    single_[static_cast<size_t>(base)] = state;
    for (int32_t i = begin; i < end;) {
      const size_t d = trie_.depth[static_cast<size_t>(i)];
      const int32_t t = pda_.step(single_[d - 1], trie_.byte[static_cast<size_t>(i)]);
      if (t < 0) {
        i = trie_.end[static_cast<size_t>(i)];
        continue;
      }
      const PdaState& st = pda_.states[static_cast<size_t>(t)];
      if (trie_.first[static_cast<size_t>(i)] < trie_.first[static_cast<size_t>(i) + 1]) on_accept(i);
      if (st.final && trie_.end[static_cast<size_t>(i)] > i + 1) on_escape(i);
      single_[d] = t;
      i = st.reads ? i + 1 : trie_.end[static_cast<size_t>(i)];
    }
  }

  const Pda& pda_;
  const TokenTrie& trie_;
  Stepper stepper_;
  std::vector<std::vector<Top>> cfg_;
  std::vector<int32_t> single_;
};

}  // namespace ds::grammar
