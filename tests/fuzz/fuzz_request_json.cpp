// Fuzz target: a request body -> what the chat and completion routes do with it before the
// model is involved: the JSON depth guard and parser (server/json.h), the generation
// parameters (request_params.h), the chat fields and messages (chat_messages.h), and the
// tool-call parser typed by the request's tool schemas (tool_call_parser.h) run over the
// message texts as if the model had written them.
// Invariant: bad input is an ApiError (a 4xx for the client) or nothing; any other exception
// (a JSON type error, say, which the server would answer with a 500) escapes and is reported
// as a crash, as are sanitizer findings.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/chat_messages.h"
#include "server/json.h"
#include "server/request_params.h"
#include "server/tool_call_parser.h"

using namespace ds::server;

namespace {

void run_tool_parser(const Json& tools, const Json& messages) {
  ToolCallParser parser(tools);
  if (!messages.is_array()) return;
  for (const auto& m : messages) {
    if (!m.is_object()) continue;
    auto it = m.find("content");
    if (it == m.end() || !it->is_string()) continue;
    const std::string& text = it->get_ref<const std::string&>();
    // Fed in two pieces, as streamed model output arrives.
    parser.push(std::string_view(text).substr(0, text.size() / 2));
    parser.push(std::string_view(text).substr(text.size() / 2));
  }
  parser.flush();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const Json body = parse_json(text);
  if (!body.is_object()) return 0;
  GenerationDefaults defaults;
  defaults.temperature = 0.7f;
  defaults.top_p = 0.8f;
  try {
    parse_generation_params(body, size % 2 ? Endpoint::chat : Endpoint::completions, defaults, 1024);
  } catch (const ApiError& e) {
    if (e.status() < 400 || e.status() >= 500) throw;
  }
  try {
    const ChatFields f = parse_chat_fields(body);
    run_tool_parser(f.tools, f.messages);
  } catch (const ApiError& e) {
    if (e.status() < 400 || e.status() >= 500) throw;
  }
  return 0;
}
