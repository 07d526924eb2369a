// GenerationJob: the engine requests behind one HTTP request (n choices, times the prompts of
// a batched /v1/completions), read together.
//
// Construction submits every choice; if the engine refuses one, those already accepted are
// cancelled and the refusal becomes an ApiError (429 queue full with Retry-After, 413 prompt
// too long, 400 invalid, 503 shutting down). next() waits for events of any choice and hands
// back what each choice adds (its ChoiceDelta) and whether it finished; a choice that ends
// on a stop string has its engine request cancelled on the spot. Inter-token gaps are fed to
// the metrics from the event timestamps (the other latencies come from the engine's
// on_finish hook, see metrics.h).
//
// Used by one thread (the HTTP handler). cancel_ids() lists the engine ids so that another
// thread (the disconnect watcher) can cancel them through Engine::cancel, which is
// thread-safe; dropping the job cancels whatever still runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/engine.h"
#include "server/choice_output.h"
#include "server/openai_format.h"
#include "server/metrics.h"

namespace ds::server {

struct ChoiceSpec {
  scheduler::Request request;
  ChoiceOptions options;
  int prompt_index = 0;  // which prompt of the HTTP request (for usage)
};

struct ChoiceUpdate {
  int index = 0;
  ChoiceDelta delta;
  bool finished = false;  // this update finishes the choice
};

class GenerationJob {
 public:
  // prompt_param names the request field of the prompt in errors ("messages", "prompt").
  GenerationJob(scheduler::Engine& engine, const tok::Tokenizer& tokenizer, ServerMetrics& metrics,
                std::vector<ChoiceSpec> specs, const std::string& prompt_param);
  ~GenerationJob();
  GenerationJob(const GenerationJob&) = delete;
  GenerationJob& operator=(const GenerationJob&) = delete;

  // Waits up to `timeout` for events; returns the updates (empty on timeout).
  std::vector<ChoiceUpdate> next(std::chrono::milliseconds timeout);
  bool done() const;
  // Cancels every engine request still running (the choices end with reason "abort").
  void cancel();

  std::vector<scheduler::RequestId> ids() const;
  size_t size() const { return choices_.size(); }
  const ChoiceOutput& choice(size_t i) const { return *choices_[i].output; }
  // Prompt tokens (each prompt once, whatever n), generated tokens, and, once every choice has
  // ended, the prompt tokens taken from the prefix cache (each prompt's first choice's).
  Usage usage() const;

 private:
  struct Choice {
    scheduler::RequestHandle handle;
    std::unique_ptr<ChoiceOutput> output;
    bool engine_done = false;  // final event taken
    bool counts_prompt = false;  // the first choice of its prompt
    int64_t cached_tokens = 0;   // from its events
    bool usage_known = false;    // an event brought cached_tokens
    bool reasoning = false;      // a chat choice: usage reports its reasoning tokens
    bool have_prev = false;
    scheduler::Clock::time_point prev;  // last token event (inter-token latency)
  };
  // Takes every ready event of choice i; true if any.
  bool drain(size_t i, std::vector<ChoiceUpdate>& out);

  scheduler::Engine& engine_;
  ServerMetrics& metrics_;
  std::vector<Choice> choices_;
  int64_t prompt_tokens_ = 0;
  size_t rotate_ = 0;
};

}  // namespace ds::server
