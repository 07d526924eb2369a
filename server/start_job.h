// Starting a GenerationJob for a validated request: the engine requests of its prompts (n
// choices each, after the context-length check) and the output pipeline options of each
// choice. Every generation route starts its job here; the chat-shaped ones (chat
// completions, Anthropic Messages, OpenAI Responses) all translate their request into an
// OpenAI chat body and go through start_chat_job, so they render, sample, stop, split
// reasoning and parse tool calls alike.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/grammar/compiler.h"
#include "server/generation_job.h"
#include "server/json.h"
#include "server/request_params.h"
#include "server/routes.h"

namespace ds::server {

using PromptIds = std::shared_ptr<const std::vector<int32_t>>;

// The request fields that errors name: a prompt that does not fit the context, or a reply
// length that does not fit beside it (each API spells them its own way).
struct RequestFields {
  std::string prompt = "messages";
  std::string max_tokens = "max_tokens";
};

// The output options every route shares (stop strings, special tokens, logprobs, eos).
ChoiceOptions choice_options(const ServedModel& model, const GenerationParams& params);

// The structured-output grammar every choice samples under (null: none), and the token after
// which it applies (-1: from the first token; structured_output.h reads the request's fields).
struct OutputGrammar {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  int32_t after = -1;
};

// A completions body's grammar (response_format, structured_outputs, guided_*), compiled while
// the request's client is watched (a client that leaves cancels the compile).
OutputGrammar completion_grammar(const RouteContext& ctx, const Json& body);

// n engine requests per prompt. As OpenAI and vLLM: a prompt that leaves no room for one
// reply token, or a max_tokens that cannot fit beside the prompt, is a 400 naming both
// numbers (never a silent clamp; a max_tokens near 2^63 included). Each prompt's end is a
// cache point (the prefix cache keeps its state), so a prompt sent again is served from the
// cache on its second send.
std::vector<ChoiceSpec> choice_specs(const ServedModel& model, const GenerationParams& params,
                                     const std::vector<PromptIds>& prompts, const ChoiceOptions& options,
                                     const RequestFields& fields, const std::vector<int64_t>& cache_points = {},
                                     const OutputGrammar& grammar = {}, const LoraChoice& lora = {});

// Renders an OpenAI chat body (chat_request.h) and submits its choices with reasoning split
// and, when the request has tools, tool calls parsed; under the body's structured-output
// grammar or the tool-call grammar its tool_choice forces; with the LoRA adapter the request's
// model named (check_model).
std::unique_ptr<GenerationJob> start_chat_job(const RouteContext& ctx, const Json& chat_body,
                                              const GenerationParams& params, const RequestFields& fields = {},
                                              const LoraChoice& lora = {});

}  // namespace ds::server
