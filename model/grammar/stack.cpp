// FramePool and Stepper (stack.h).
#include "model/grammar/stack.h"

#include <algorithm>

namespace ds::grammar {
namespace {

// A closure this large means a grammar that pushes without reading (the compiler refuses left
// recursion, so only a pathological grammar gets here); fail rather than run away.
constexpr size_t kMaxClosure = 1 << 16;

}  // namespace

void FramePool::clear() {
  frames_.clear();
  index_.clear();
  frames_.push_back({-1, -1});
}

int32_t FramePool::push(int32_t ret, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(ret)) << 32) | static_cast<uint32_t>(parent);
  auto [it, inserted] = index_.emplace(key, static_cast<int32_t>(frames_.size()));
  if (inserted) frames_.push_back({ret, parent});
  return it->second;
}

bool Stepper::seen(Top t) {
  // Closures are small (a few tops); a linear scan beats hashing until they are not.
  if (visited_.size() < 32) {
    for (const Top& v : visited_)
      if (v == t) return true;
    visited_.push_back(t);
    if (visited_.size() == 32) {
      visited_set_.clear();
      for (const Top& v : visited_) visited_set_.insert(key(v));
    }
    return false;
  }
  if (!visited_set_.insert(key(t)).second) return true;
  visited_.push_back(t);
  return false;
}

bool Stepper::close(std::span<const Top> seeds, FramePool& pool, std::vector<Top>& out) {
  out.clear();
  visited_.clear();
  work_.assign(seeds.begin(), seeds.end());
  bool bottom = false;
  while (!work_.empty()) {
    const Top t = work_.back();
    work_.pop_back();
    if (seen(t)) continue;
    if (visited_.size() > kMaxClosure) throw GrammarError("grammar: the matcher's closure grew without bound");
    const PdaState& st = pda_.states[static_cast<size_t>(t.state)];
    if (st.reads) out.push_back(t);
    for (uint32_t k = st.calls_begin; k < st.calls_end; ++k) {
      const PdaCall& c = pda_.calls[k];
      work_.push_back({pda_.rule_start[static_cast<size_t>(c.rule)], pool.push(c.ret, t.frame)});
    }
    if (st.final) {
      if (t.frame == 0) {
        bottom = true;
      } else {
        const Frame& f = pool.at(t.frame);
        work_.push_back({f.ret, f.parent});
      }
    }
  }
  if (out.size() > 1) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return bottom;
}

bool Stepper::advance(std::span<const Top> tops, uint8_t byte, FramePool& pool, std::vector<Top>& out) {
  out.clear();
  seeds_.clear();
  for (const Top& t : tops) {
    const int32_t n = pda_.step(t.state, byte);
    if (n < 0) continue;
    const PdaState& st = pda_.states[static_cast<size_t>(n)];
    // Most steps stay inside one rule's byte automaton: nothing to follow.
    if (!st.final && st.calls_begin == st.calls_end)
      out.push_back({n, t.frame});
    else
      seeds_.push_back({n, t.frame});
  }
  bool bottom = false;
  if (!seeds_.empty()) {
    bottom = close(seeds_, pool, closed_);
    out.insert(out.end(), closed_.begin(), closed_.end());
  }
  if (out.size() > 1) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return bottom;
}

}  // namespace ds::grammar
