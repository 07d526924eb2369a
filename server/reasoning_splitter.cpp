#include "server/reasoning_splitter.h"

#include "server/partial_match.h"

namespace ds::server {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool start_in_reasoning, bool at_start_only)
    : in_reasoning_(start_in_reasoning), at_start_only_(at_start_only) {}

bool ReasoningSplitter::prompt_opens_reasoning(std::string_view prompt) {
  const size_t open = prompt.rfind(kOpen);
  if (open == std::string_view::npos) return false;
  return prompt.find(kClose, open) == std::string_view::npos;
}

void ReasoningSplitter::emit(Split& out, std::string_view text) {
  if (skip_newlines_) {
    const size_t first = text.find_first_not_of('\n');
    if (first == std::string_view::npos) return;
    text.remove_prefix(first);
    skip_newlines_ = false;
  }
  if (!in_reasoning_ && at_start_only_ && text.find_first_not_of(" \t\r\n") != std::string_view::npos)
    may_open_ = false;
  (in_reasoning_ ? out.reasoning : out.content).append(text);
}

ReasoningSplitter::Split ReasoningSplitter::push(std::string_view text) {
  Split out;
  std::string buf = std::move(held_);
  held_.clear();
  buf.append(text);
  std::string_view rest = buf;
  for (;;) {
    if (!in_reasoning_ && !may_open_) break;
    const std::string_view tag = in_reasoning_ ? kClose : kOpen;
    const size_t p = rest.find(tag);
    if (p == std::string_view::npos) break;
    emit(out, rest.substr(0, p));
    rest.remove_prefix(p);
    if (!in_reasoning_ && !may_open_) break;  // content before the tag made it text
    rest.remove_prefix(tag.size());
    if (in_reasoning_) may_open_ = false;  // one block per reply
    in_reasoning_ = !in_reasoning_;
    skip_newlines_ = true;
  }
  const size_t hold = in_reasoning_ || may_open_ ? partial_tag_tail(rest, in_reasoning_ ? kClose : kOpen) : 0;
  emit(out, rest.substr(0, rest.size() - hold));
  held_.assign(rest.substr(rest.size() - hold));
  return out;
}

ReasoningSplitter::Split ReasoningSplitter::flush() {
  Split out;
  std::string tail = std::move(held_);
  held_.clear();
  emit(out, tail);
  return out;
}

}  // namespace ds::server
