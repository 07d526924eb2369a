// Workload: everything bench_serve sends, built from the dataset flags before the clock
// starts, so generating prompts never shows in the timings.
//
// A Session is what one simulated client does, in order. The random, shared-prefix and file
// datasets make one-request sessions; multi-turn makes conversations, whose turn t sends the
// whole history (system prompt, the earlier user messages and the replies the server gave to
// them) plus user message t, as a chat client does. Sessions start at the arrival times of
// the load generator (load_generator.h).
#pragma once

#include <string>
#include <vector>

#include "programs/bench_serve/bench_json.h"
#include "programs/bench_serve/bench_options.h"

namespace ds::bench {

struct Turn {
  // /v1/completions: the "prompt" (text or token ids). /v1/chat/completions: the "messages";
  // in a conversation, the text of this turn's user message instead.
  Json input;
  int max_tokens = 0;
  int nominal_input_len = 0;  // the tokens the dataset meant to send (usage has the truth)
  bool structured = false;    // carries --structured-body (constrained decoding)
};

struct Session {
  std::vector<Turn> turns;
  bool conversation = false;  // turns carry the history (multi-turn)
  std::string system_prompt;  // conversations: the first message, when not empty
};

// The sessions for `o` (the dataset flags; validate_options passed), with
// mark_structured's choice of constrained requests. Throws std::runtime_error for an
// unreadable or malformed --dataset-path, naming file and line.
std::vector<Session> build_workload(const BenchOptions& o);

// Marks round(fraction x requests) of the requests (turns of all sessions) structured,
// chosen uniformly by `seed` from a generator of their own, so the prompts are the same at
// every fraction and a run at fraction F constrains the same requests each time.
void mark_structured(std::vector<Session>& sessions, double fraction, uint64_t seed);

// The "messages" of a conversation's next request: system prompt, then each earlier user
// message with the reply to it, then `user`.
Json conversation_messages(const Session& s, const std::vector<std::string>& replies, size_t turn);

// Requests in the workload (turns of all sessions).
size_t count_requests(const std::vector<Session>& sessions);

}  // namespace ds::bench
