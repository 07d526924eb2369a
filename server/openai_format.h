// The OpenAI response shapes: chat completions and text completions, whole or as stream
// chunks, with logprobs, tool calls and usage. Pure functions of what a GenerationJob
// produced, so they can be tested without a server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.h"
#include "server/choice_output.h"
#include "server/json.h"

namespace ds::server {

// The fields every response and chunk of one request shares.
struct ResponseHeader {
  std::string id;      // chatcmpl-... / cmpl-...
  int64_t created = 0;  // unix seconds
  std::string model;
};

// Token counts of a response. cached_tokens (prompt tokens taken from the prefix cache) is
// reported as usage.prompt_tokens_details.cached_tokens once known (at the end).
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::optional<int64_t> cached_tokens;
  std::optional<int64_t> reasoning_tokens;  // chat replies (completion_tokens_details)
};
Json usage_json(const Usage& usage);

// {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}
Json chat_logprobs_json(const tok::Tokenizer& tokenizer, const std::vector<TokenLogprobInfo>& entries);
// {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
Json completion_logprobs_json(const tok::Tokenizer& tokenizer, const std::vector<TokenLogprobInfo>& entries);

// Tool-call deltas as a chunk's delta.tool_calls: consecutive deltas of one call merged, the
// opening one carrying id, type and name.
Json tool_call_deltas_json(const std::vector<ToolCallDelta>& deltas);
// The finished calls of a choice, for message.tool_calls.
Json tool_calls_json(const std::vector<ToolCallDelta>& deltas);

// One finished choice of a non-streaming response.
struct FinishedChoice {
  int index = 0;
  ChoiceDelta output;  // everything the choice produced
  std::string finish_reason;
  Json stop_reason;  // null, a string or a token id
  Json token_ids;    // null, or the generated ids (return_token_ids)
};

Json chat_completion_json(const ResponseHeader& h, const tok::Tokenizer& tokenizer,
                          const std::vector<FinishedChoice>& choices, bool logprobs, const Usage& usage);
Json text_completion_json(const ResponseHeader& h, const tok::Tokenizer& tokenizer,
                          const std::vector<FinishedChoice>& choices, bool logprobs, const Usage& usage);

// One stream chunk for choice `index`. `role` adds "role": "assistant" to the delta (the
// first chunk of a chat choice); finish_reason is null until the choice ends.
Json chat_chunk_json(const ResponseHeader& h, const tok::Tokenizer& tokenizer, int index, const ChoiceDelta& delta,
                     bool role, bool logprobs, const std::optional<std::string>& finish_reason,
                     const Json& stop_reason);
Json text_chunk_json(const ResponseHeader& h, const tok::Tokenizer& tokenizer, int index, const ChoiceDelta& delta,
                     bool logprobs, const std::optional<std::string>& finish_reason, const Json& stop_reason);
// The final usage chunk of include_usage: empty choices.
Json usage_chunk_json(const ResponseHeader& h, bool chat, const Usage& usage);

// "data: <json>\n\n"
std::string sse_event(const Json& j);
// "event: <name>\ndata: <json>\n\n" (the Anthropic and Responses streams name their events)
std::string sse_event(std::string_view name, const Json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace ds::server
