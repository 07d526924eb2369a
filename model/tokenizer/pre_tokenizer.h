// The pre-tokenizer stage of an HF tokenizer: cuts normalized text into the pieces that BPE
// encodes one at a time (a piece never merges with its neighbours).
//
// Supported tokenizer.json "pre_tokenizer" values: null, Split, ByteLevel and a Sequence of
// them, which covers every byte-level BPE of the Qwen, Llama-3, DeepSeek and GPT-2 families.
//  * Split: pattern {"Regex": ...} (see regex.h) or {"String": ...} (a literal), behavior
//    Isolated / Removed / MergedWithPrevious / MergedWithNext / Contiguous, and invert,
//    with HF's semantics (matches and the gaps between them become pieces; empty pieces
//    vanish).
//  * ByteLevel: add_prefix_space puts a space before every piece that does not start with
//    one; use_regex splits with GPT-2's pattern. The byte-to-character mapping itself is not
//    done here: BPE works on the bytes directly (byte_level.h).
// Anything else is refused at load time with the type named.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds::tok {

class Regex;

// Pieces of one input. Most are views of the input; a piece that had to be rewritten (a
// prefix space added) lives in `owned`, which keeps it at a stable address.
struct Pieces {
  std::vector<std::string_view> views;
  std::deque<std::string> owned;
};

class PreTokenizer {
 public:
  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Builds from the "pre_tokenizer" value of tokenizer.json (null allowed). Throws
  // TokenizerError naming what is unsupported.
  static PreTokenizer from_json(const nlohmann::json& j);

  // Cuts valid UTF-8 `text` into pieces (appended to out.views, in order).
  void split(std::string_view text, Pieces& out) const;

  // True when a ByteLevel step is present (the model must then be byte-level).
  bool has_byte_level() const { return has_byte_level_; }

  struct Step;  // one stage (Split or ByteLevel), defined in pre_tokenizer.cpp

 private:
  std::vector<std::unique_ptr<Step>> steps_;
  bool has_byte_level_ = false;
};

}  // namespace ds::tok
