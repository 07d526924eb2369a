// An OpenAI Responses request (POST /v1/responses, the stateless subset) as the OpenAI chat
// body the chat pipeline runs (chat_messages.h, request_params.h), before any template or
// model is involved (so the fuzz target in tests/fuzz drives it alone).
//
//  * `instructions` and the system / developer messages that open `input` -> one leading
//    system message (Qwen's templates accept a system message only first); later ones stay
//    system messages;
//  * `input`: a string (one user message) or items: messages (content a string or
//    input_text / output_text parts), function_call (-> the assistant's tool_calls),
//    function_call_output (-> a "tool" message), reasoning (its reasoning_text content, else
//    its summary, -> the next assistant turn's reasoning_content); the reasoning, message and
//    function_call items of one assistant turn make one assistant message. Images, files,
//    item references and built-in tool items are refused by name;
//  * tools: function tools ({type: function, name, description, parameters, strict}) ->
//    chat function tools; built-in tools (web_search, file_search, ...) are refused;
//  * tool_choice auto | none | required | {type: function, name} -> the chat forms (a forced
//    call is sampled under the tool-call grammar, as in chat);
//  * reasoning.effort none | minimal -> chat_template_kwargs.enable_thinking = false, low |
//    medium | high | xhigh -> true, absent -> the template's default; the effort also goes to
//    the chat body's reasoning_effort, which gives it its budget (thinking_setup.h, serve's
//    --reasoning-effort-budgets); thinking_token_budget / thinking_budget pass through;
//    text.format -> response_format;
//    max_output_tokens -> max_tokens; temperature, top_p, stream carry over;
//  * nothing is stored: store: true, previous_response_id, background, conversation and
//    prompt are refused; include may name "reasoning.encrypted_content" (reasoning comes back
//    as text in the reasoning items instead, which is what a stateless client sends back).
// Unknown fields are ignored. Every refusal is an ApiError 400 naming the field.
#pragma once

#include "server/json.h"

namespace ds::server {

struct ResponsesRequest {
  Json chat_body;  // what the chat pipeline runs
  // The request's settings that a response object repeats: instructions, max_output_tokens,
  // parallel_tool_calls, reasoning, text, tool_choice, tools, user, metadata.
  Json settings;
};

ResponsesRequest parse_responses_request(const Json& body);

}  // namespace ds::server
