#include "server/reasoning_splitter.h"

#include "server/partial_match.h"

namespace ds::server {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool start_in_reasoning) : in_reasoning_(start_in_reasoning) {}

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
  (in_reasoning_ ? out.reasoning : out.content).append(text);
}

ReasoningSplitter::Split ReasoningSplitter::push(std::string_view text) {
  Split out;
  std::string buf = std::move(held_);
  held_.clear();
  buf.append(text);
  std::string_view rest = buf;
  for (;;) {
    const std::string_view tag = in_reasoning_ ? kClose : kOpen;
    const size_t p = rest.find(tag);
    if (p == std::string_view::npos) break;
    emit(out, rest.substr(0, p));
    rest.remove_prefix(p + tag.size());
    in_reasoning_ = !in_reasoning_;
    skip_newlines_ = true;
  }
  const size_t hold = partial_tag_tail(rest, in_reasoning_ ? kClose : kOpen);
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
