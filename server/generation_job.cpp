#include "server/generation_job.h"

#include <set>

#include "server/api_error.h"

namespace ds::server {

namespace {

ApiError refusal(const scheduler::SubmitResult& r, const std::string& prompt_param) {
  using scheduler::SubmitStatus;
  switch (r.status) {
    case SubmitStatus::queue_full: return queue_full(r.message);
    case SubmitStatus::prompt_too_long: return context_too_long(r.message, prompt_param);
    case SubmitStatus::invalid_request: return bad_request(r.message);
    case SubmitStatus::shutting_down: return unavailable(r.message, "shutting_down");
    case SubmitStatus::ok: break;
  }
  return internal_error("unexpected submit status");
}

}  // namespace

GenerationJob::GenerationJob(scheduler::Engine& engine, const tok::Tokenizer& tokenizer, ServerMetrics& metrics,
                             std::vector<ChoiceSpec> specs, const std::string& prompt_param)
    : engine_(engine), metrics_(metrics) {
  std::set<int> prompts;
  choices_.reserve(specs.size());
  for (auto& s : specs) {
    const bool first_of_prompt = prompts.insert(s.prompt_index).second;
    if (first_of_prompt) prompt_tokens_ += static_cast<int64_t>(s.request.prompt_size());
    auto r = engine.submit(s.request);
    if (!r.ok()) {
      ApiError e = refusal(r, prompt_param);
      choices_.clear();  // dropping the handles cancels what was accepted
      throw e;
    }
    Choice c;
    c.counts_prompt = prompts.count(s.prompt_index) == 1 && first_of_prompt;
    c.handle = std::move(r.handle);
    c.reasoning = s.options.reports_reasoning;
    c.output = std::make_unique<ChoiceOutput>(tokenizer, std::move(s.options));
    choices_.push_back(std::move(c));
  }
}

GenerationJob::~GenerationJob() {
  // A choice dropped before its end (its client left, or a stream write failed) finished as
  // an abort: count it here, since no handler will read its final event.
  for (const auto& c : choices_)
    if (!c.output->finished()) metrics_.count_finished("abort");
}

std::vector<scheduler::RequestId> GenerationJob::ids() const {
  std::vector<scheduler::RequestId> v;
  for (const auto& c : choices_) v.push_back(c.handle.id());
  return v;
}

bool GenerationJob::done() const {
  for (const auto& c : choices_)
    if (!c.output->finished()) return false;
  return true;
}

void GenerationJob::cancel() {
  for (auto& c : choices_)
    if (!c.engine_done) c.handle.cancel();
}

Usage GenerationJob::usage() const {
  Usage u;
  u.prompt_tokens = prompt_tokens_;
  int64_t cached = 0;
  bool all_done = true;
  for (const auto& c : choices_) {
    u.completion_tokens += c.output->completion_tokens();
    if (c.reasoning) u.reasoning_tokens = u.reasoning_tokens.value_or(0) + c.output->reasoning_tokens();
    all_done = all_done && (c.engine_done || c.usage_known);
    if (c.counts_prompt) cached += c.cached_tokens;
  }
  if (all_done) u.cached_tokens = cached;
  return u;
}

bool GenerationJob::drain(size_t i, std::vector<ChoiceUpdate>& out) {
  Choice& c = choices_[i];
  bool any = false;
  while (!c.engine_done) {
    auto e = c.handle.try_next();
    if (!e) break;
    any = true;
    if (e->token >= 0) {
      if (c.have_prev) metrics_.observe_inter_token(scheduler::RequestMetrics::seconds(c.prev, e->time));
      c.prev = e->time;
      c.have_prev = true;
    }
    if (e->is_final()) c.engine_done = true;
    if (e->token >= 0 || e->is_final()) {
      c.cached_tokens = e->cached_tokens;
      c.usage_known = true;
    }
    const bool was_finished = c.output->finished();
    ChoiceDelta d = c.output->on_event(*e);
    const bool now_finished = !was_finished && c.output->finished();
    if (now_finished) {
      metrics_.count_finished(*c.output->finish_reason());
      if (c.output->wants_cancel()) c.handle.cancel();
    }
    if (!d.empty() || now_finished) out.push_back({static_cast<int>(i), std::move(d), now_finished});
  }
  return any;
}

std::vector<ChoiceUpdate> GenerationJob::next(std::chrono::milliseconds timeout) {
  std::vector<ChoiceUpdate> out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (size_t i = 0; i < choices_.size(); ++i) drain(i, out);
    if (!out.empty() || done()) return out;
    // Wait on one unfinished choice. The engine delivers the events of one iteration
    // together, so with several choices a short wait on one of them, in turn, misses little.
    std::vector<size_t> live;
    for (size_t i = 0; i < choices_.size(); ++i)
      if (!choices_[i].output->finished()) live.push_back(i);
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return out;
    auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now);
    if (live.size() > 1) wait = std::min<std::chrono::nanoseconds>(wait, std::chrono::milliseconds(2));
    Choice& c = choices_[live[rotate_++ % live.size()]];
    c.handle.wait_for(wait);
  }
}

}  // namespace ds::server
