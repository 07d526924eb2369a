#include "server/chat_request.h"

#include "model/chat/template_error.h"
#include "server/api_error.h"
#include "server/reasoning_splitter.h"
#include "server/request_params.h"

namespace ds::server {

ChatPrompt build_chat_prompt(const Json& body, const ServedModel& model) {
  ChatFields f = parse_chat_fields(body);
  ChatPrompt p;
  p.tools = std::move(f.tools);
  p.parse_tool_calls = f.parse_tool_calls;
  if (!model.chat_template)
    throw bad_request("the model '" + model.name + "' has no chat template; use /v1/completions or start the server with --chat-template FILE");
  try {
    p.rendered = model.chat_template->render(f.messages, f.kwargs, f.add_generation_prompt);
  } catch (const chat::TemplateError& e) {
    // The message starts with the template's file; a client sees its name, not where the
    // server keeps it.
    std::string what = e.what();
    if (!what.empty() && what.front() == '/') {
      const size_t slash = what.rfind('/', what.find(':'));
      what.erase(0, slash + 1);
    }
    throw ApiError(400, "the chat template rejected the request: " + what, "invalid_request_error", "messages",
                   "chat_template_error");
  }
  p.ids = model.tokenizer->encode(p.rendered, /*allow_special=*/true);
  p.opens_reasoning = ReasoningSplitter::prompt_opens_reasoning(p.rendered);
  return p;
}

}  // namespace ds::server
