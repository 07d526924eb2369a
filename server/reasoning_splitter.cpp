#include "server/reasoning_splitter.h"

#include <algorithm>

namespace ds::server {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// Length of the longest tail of `s` that is a proper prefix of `tag`.
size_t partial_tag_tail(std::string_view s, std::string_view tag) {
  const size_t max_len = std::min(tag.size() - 1, s.size());
  for (size_t len = max_len; len > 0; --len)
    if (s.substr(s.size() - len) == tag.substr(0, len)) return len;
  return 0;
}

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
