// Fuzz target: a request body -> what the chat and completion routes do with it before the
// model is involved: the JSON depth guard and parser (server/json.h), the generation
// parameters (request_params.h), the chat fields and messages (chat_messages.h), and the
// tool-call parser typed by the request's tool schemas (tool_call_parser.h) run over the
// message texts as if the model had written them, the thinking fields (thinking_setup.h:
// the budget, the effort, the template kwargs they set, the engine's spec), and the images
// (image_inputs.h: mm_processor_kwargs, each image part's data: URL decoded, preprocessed and
// hashed, a prompt's pads expanded; the media policy allows no host and no file, so nothing
// is fetched). The same body read as an Anthropic Messages and an OpenAI Responses request
// (messages_request.h, responses_request.h: image blocks, input_image parts, images in
// tool results) goes through its translation and then the chat path, as those routes do.
// Invariant: bad input is an ApiError (a 4xx for the client) or nothing; any other exception
// (a JSON type error, say, which the server would answer with a 500) escapes and is reported
// as a crash, as are sanitizer findings.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"
#include "server/chat_messages.h"
#include "server/image_inputs.h"
#include "server/json.h"
#include "server/messages_request.h"
#include "server/request_params.h"
#include "server/responses_request.h"
#include "server/thinking_setup.h"
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

// A model whose tokenizer has the think tags (ids of the tiny model's), with effort budgets.
ThinkingSetup fuzz_thinking_setup() {
  ThinkingSetup s;
  s.open_token = 1011;
  s.close_token = 1012;
  s.close_sequence = {1012, 271};
  s.template_takes_effort = true;
  s.default_budget = 64;
  s.effort_budgets = {{"low", 16}, {"high", 256}};
  return s;
}

// A model's image settings, tight so that each input runs fast: tiny-qwen35-vl's pad id,
// 16-pixel patches merged 2 x 2, 32 x 32 to 256 x 256 pixels, small decode limits.
VisionServing fuzz_vision() {
  VisionServing v;
  v.image_token_id = 1022;
  v.processor.patch_size = 16;
  v.processor.merge_size = 2;
  v.processor.min_pixels = 1024;
  v.processor.max_pixels = 65536;
  v.max_images = 4;
  v.media.max_bytes = 1 << 20;
  v.decode.max_bytes = 1 << 20;
  v.decode.max_pixels = 1 << 20;
  v.decode.max_side = 4096;
  v.decode.max_time = std::chrono::milliseconds(500);
  return v;
}

// The chat route's images: a prompt with one pad per image between text tokens, expanded to
// each image's tokens. Invariant: the expansion holds exactly the images' tokens.
void run_images(const Json& body, const std::vector<ImageRef>& refs) {
  const ds::vision::PixelBounds bounds = parse_mm_processor_kwargs(body).pixels;
  if (refs.empty()) return;
  static const VisionServing v = fuzz_vision();
  std::vector<int32_t> ids{1, 2};
  for (size_t i = 0; i < refs.size(); ++i) ids.insert(ids.end(), {v.image_token_id, 3});
  const auto mm = prepare_images(refs, v, bounds, ids);
  int64_t want = 0, pads = 0;
  for (const auto& im : mm->images) want += im.pixels->num_tokens(v.merge_size);
  for (int32_t t : ids) pads += t == v.image_token_id;
  if (pads != want || mm->images.size() != refs.size()) throw std::logic_error("prepare_images: wrong pad count");
}

// What the chat routes do with a chat body: its parameters, chat fields, thinking fields and
// images.
void run_chat_body(const Json& body, const GenerationDefaults& defaults) {
  parse_generation_params(body, Endpoint::chat, defaults, 1024);
  ChatFields f = parse_chat_fields(body);
  run_tool_parser(f.tools, f.messages);
  run_images(body, f.images);
  static const ThinkingSetup setup = fuzz_thinking_setup();
  const ThinkingFields t = parse_thinking_fields(body);
  apply_effort_to_kwargs(t, setup, f.kwargs);
  const auto spec = thinking_spec(t, setup, body.size() % 2 == 0, body.size() % 3 == 0);
  if (spec && !spec->validate(2048).empty()) throw std::logic_error("thinking_spec made an invalid spec");
}

// Runs fn; a 4xx ApiError is a refusal, anything else escapes.
template <class Fn>
void refusals_only(Fn&& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    if (e.status() < 400 || e.status() >= 500) throw;
  }
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
  refusals_only([&] { run_chat_body(body, defaults); });
  refusals_only([&] {
    run_chat_body(messages_to_chat_body(body, size % 3 ? MessagesEndpoint::create : MessagesEndpoint::count_tokens),
                  defaults);
  });
  refusals_only([&] { run_chat_body(parse_responses_request(body).chat_body, defaults); });
  return 0;
}
