#include "server/choice_output.h"

#include <algorithm>

namespace ds::server {

void ChoiceDelta::append(ChoiceDelta&& o) {
  content += o.content;
  reasoning += o.reasoning;
  for (auto& c : o.tool_calls) tool_calls.push_back(std::move(c));
  for (auto& l : o.logprobs) logprobs.push_back(std::move(l));
}

ChoiceOutput::ChoiceOutput(const tok::Tokenizer& tokenizer, ChoiceOptions options)
    : tokenizer_(tokenizer),
      opt_(std::move(options)),
      detok_(tokenizer, opt_.skip_special),
      stops_(opt_.stop, opt_.include_stop),
      reasoning_(opt_.start_in_reasoning, opt_.reasoning_at_start_only),
      tools_(opt_.tools) {
  if (opt_.thinking) thinking_.emplace(opt_.thinking);
}

void ChoiceOutput::route(ChoiceDelta& d, std::string_view text, bool flush) {
  text_bytes_ += text.size();
  auto to_content = [&](std::string_view t, bool end) {
    if (!opt_.parse_tool_calls) {
      d.content.append(t);
      return;
    }
    auto o = tools_.push(t);
    d.content += o.content;
    for (auto& c : o.calls) d.tool_calls.push_back(std::move(c));
    if (end) {
      auto f = tools_.flush();
      d.content += f.content;
      for (auto& c : f.calls) d.tool_calls.push_back(std::move(c));
    }
  };
  if (!opt_.split_reasoning) {
    to_content(text, flush);
    return;
  }
  auto s = reasoning_.push(text);
  if (flush) {
    auto f = reasoning_.flush();
    s.reasoning += f.reasoning;
    s.content += f.content;
  }
  d.reasoning += s.reasoning;
  to_content(s.content, flush);
}

ChoiceDelta ChoiceOutput::on_event(const scheduler::RequestEvent& e) {
  ChoiceDelta d;
  if (finished()) return d;

  const bool final = e.is_final();
  std::string text;
  if (e.token >= 0) {
    ++completion_tokens_;
    if (opt_.split_reasoning && reasoning_.in_reasoning()) ++reasoning_tokens_;
    if (thinking_) thinking_->accept(e.token);
    token_ids_.push_back(e.token);
    if (opt_.logprobs) d.logprobs.push_back({e.token, e.logprob, e.top_logprobs, text_bytes_});
    const bool ends_on_eos = final && e.finish == scheduler::FinishReason::stop && e.stop_token == e.token &&
                             std::find(opt_.eos_ids.begin(), opt_.eos_ids.end(), e.token) != opt_.eos_ids.end();
    if (!ends_on_eos) text = detok_.push(e.token);
  }
  if (final) text += detok_.flush();

  auto r = stops_.push(text);
  if (r.stopped) {
    route(d, r.text, true);
    finish_reason_ = "stop";
    stop_reason_ = r.matched;
    wants_cancel_ = !final;
    return d;
  }
  if (!final) {
    route(d, r.text, false);
    return d;
  }
  r.text += stops_.flush();
  route(d, r.text, true);
  switch (*e.finish) {
    case scheduler::FinishReason::stop:
      finish_reason_ = tools_.num_calls() > 0 ? "tool_calls" : "stop";
      if (e.stop_token >= 0 &&
          std::find(opt_.eos_ids.begin(), opt_.eos_ids.end(), e.stop_token) == opt_.eos_ids.end())
        stop_reason_ = e.stop_token;
      break;
    case scheduler::FinishReason::length: finish_reason_ = "length"; break;
    case scheduler::FinishReason::cancelled: finish_reason_ = "abort"; break;
    case scheduler::FinishReason::error:
      finish_reason_ = "error";
      error_ = e.error.empty() ? "the engine failed this request" : e.error;
      break;
  }
  return d;
}

}  // namespace ds::server
