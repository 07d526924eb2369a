// An Anthropic Messages request (POST /v1/messages, /v1/messages/count_tokens) as the OpenAI
// chat body the chat pipeline runs (chat_messages.h, request_params.h), before any template
// or model is involved (so the fuzz target in tests/fuzz drives it alone).
//
//  * `system` (a string or text blocks) -> a leading system message;
//  * user content blocks: text -> the user message's text (blocks joined with "\n");
//    tool_result -> a "tool" message (tool_call_id = tool_use_id; is_error prefixes
//    "Error: "); a user turn's blocks keep their order;
//  * assistant content blocks: text -> content, thinking -> reasoning_content (what chat
//    templates render), tool_use -> tool_calls (input as the arguments object);
//    redacted_thinking is dropped (it cannot be rendered);
//  * image, document and the other block types are refused by name, as are tools of a
//    server-defined type (web_search_..., bash_..., ...): only custom tools ({name,
//    description, input_schema}), which become function tools;
//  * tool_choice {type: auto | none | any | tool} -> "auto" | "none" | "required" | a named
//    function: forcing a call is refused by the chat fields (one place) until constrained
//    decoding lands;
//  * thinking {type: enabled | adaptive} -> chat_template_kwargs.enable_thinking = true,
//    {type: disabled} or no `thinking` -> false (Anthropic's default; an explicit
//    chat_template_kwargs.enable_thinking wins); an enabled block's budget_tokens ->
//    thinking_token_budget (enforced: thinking_setup.h); thinking_token_budget and thinking_budget
//    themselves (vLLM's, SGLang's) pass through;
//  * max_tokens (required when generating), temperature, top_p, top_k, stream carry over;
//    stop_sequences -> stop.
// A final assistant message (a prefilled reply for the model to continue) is refused.
// Unknown fields are ignored. Every refusal is an ApiError 400 naming the field.
#pragma once

#include "server/json.h"

namespace ds::server {

enum class MessagesEndpoint { create, count_tokens };

Json messages_to_chat_body(const Json& body, MessagesEndpoint endpoint);

}  // namespace ds::server
