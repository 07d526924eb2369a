// ReasoningSplitter: separates a Qwen reasoning model's thinking from its answer while the
// text streams.
//
// Qwen3.5's template ends the prompt inside an open "<think>\n" block (thinking on by
// default), so the reply starts as reasoning and switches to content at "</think>"; with
// enable_thinking=false the prompt already holds an empty closed block and the reply is all
// content. Older Qwen templates leave the opening to the model, so a "<think>" in the reply
// switches to reasoning as well. The server reports reasoning as both `reasoning_content`
// and `reasoning` (clients read one or the other; see docs/architecture.md).
//
// A reply holds one reasoning block: once it has closed, a later "<think>" is content. A
// reply under a structured-output grammar may only reason before its constrained part, so
// with `at_start_only` a "<think>" opens the block only before any content; after that it is
// text the grammar produced (a JSON string's "<think>" stays in the JSON). With thinking off
// the caller does not split at all (start_job.h).
// Tags split across pieces are held back until they are complete or proven not to be tags.
// The newlines the model writes right after a tag ("</think>\n\n") are dropped, as the chat
// template does when it renders an earlier turn.
#pragma once

#include <string>
#include <string_view>

namespace ds::server {

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool start_in_reasoning, bool at_start_only = false);

  // Whether a rendered prompt leaves the reply inside an open <think> block.
  static bool prompt_opens_reasoning(std::string_view rendered_prompt);

  struct Split {
    std::string reasoning;
    std::string content;
  };
  Split push(std::string_view text);
  Split flush();

  bool in_reasoning() const { return in_reasoning_; }

 private:
  void emit(Split& out, std::string_view text);

  bool in_reasoning_;
  bool at_start_only_;
  bool may_open_ = true;        // no block has closed (nor content begun, at_start_only_)
  bool skip_newlines_ = false;  // just after a tag
  std::string held_;
};

}  // namespace ds::server
