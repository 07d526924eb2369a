// Running a Pda (pda.h): stacks as a shared tree of frames, and the one-byte step.
//
// The matcher's position is a set of stacks. Each stack is a top (the state that reads the
// next byte) over a chain of frames, each frame the state a caller resumes in when the rule
// above it ends. Stacks share their lower frames, so a frame is (return state, parent frame)
// interned in a FramePool: equal stacks are equal integers, and a set of stacks is a small
// sorted vector of Tops. Frame 0 is the bottom: below the root rule, where the grammar ends.
// The mask precomputation (compiler.h) reuses it as "the unknown caller of the rule being
// examined".
//
// Stepper::close follows calls (push the callee's start over a frame for the return state)
// and returns (a final state pops its frame) until every top reads bytes; reaching the
// bottom is reported rather than followed. Stepper::advance moves every top by one byte and
// closes the result. Both dedupe.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model/grammar/pda.h"

namespace ds::grammar {

struct Top {
  int32_t state;
  int32_t frame;
  friend bool operator==(const Top&, const Top&) = default;
  friend bool operator<(const Top& a, const Top& b) {
    return a.state != b.state ? a.state < b.state : a.frame < b.frame;
  }
};

struct Frame {
  int32_t ret;     // state the caller resumes in
  int32_t parent;  // frame below; -1 for the bottom
};

class FramePool {
 public:
  FramePool() { clear(); }
  int32_t push(int32_t ret, int32_t parent);
  const Frame& at(int32_t f) const { return frames_[static_cast<size_t>(f)]; }
  size_t size() const { return frames_.size(); }
  void clear();

 private:
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, int32_t> index_;
};

class Stepper {
 public:
  explicit Stepper(const Pda& pda) : pda_(pda) {}

  // Closes `seeds` into `out` (cleared first, sorted, unique). True when some path pops the
  // bottom frame.
  bool close(std::span<const Top> seeds, FramePool& pool, std::vector<Top>& out);
  // Moves `tops` by `byte` into `out` (cleared first; must not alias `tops`) and closes it.
  // True when some path pops the bottom frame after reading the byte.
  bool advance(std::span<const Top> tops, uint8_t byte, FramePool& pool, std::vector<Top>& out);

 private:
  bool seen(Top t);
  static uint64_t key(Top t) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(t.state)) << 32) | static_cast<uint32_t>(t.frame);
  }

  const Pda& pda_;
  std::vector<Top> work_, seeds_, closed_;
  std::vector<Top> visited_;
  std::unordered_set<uint64_t> visited_set_;
};

}  // namespace ds::grammar
