#include "server/chat_request.h"

#include <algorithm>

#include "model/chat/template_error.h"
#include "server/api_error.h"
#include "server/field_path.h"
#include "server/image_inputs.h"
#include "server/reasoning_splitter.h"
#include "server/request_params.h"
#include "server/video_inputs.h"

namespace ds::server {

ChatPrompt build_chat_prompt(const Json& body, const ServedModel& model, FetchStop* stop) {
  ChatFields f = parse_chat_fields(body);
  ChatPrompt p;
  p.thinking = parse_thinking_fields(body);
  apply_effort_to_kwargs(p.thinking, model.thinking, f.kwargs);
  p.tools = std::move(f.tools);
  p.parse_tool_calls = f.parse_tool_calls;
  p.force_tool_call = f.force_tool_call;
  p.forced_function = f.forced_function;
  p.parallel_tool_calls = f.parallel_tool_calls;
  if (!model.chat_template)
    throw bad_request("the model '" + model.name + "' has no chat template; use /v1/completions or start the server with --chat-template FILE");
  if ((!f.images.empty() || !f.videos.empty()) && !model.vision)
    throw ApiError(400, "the model '" + model.name + "' does not take " + (f.images.empty() ? "videos" : "images") +
                       ": " + model.vision_unusable,
                   "invalid_request_error", (f.images.empty() ? f.videos : f.images).front().field,
                   "model_not_multimodal");
  const MmProcessorKwargs mm_kwargs = parse_mm_processor_kwargs(body);
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
  // Videos first: their timestamps go into the text before it is tokenised (video_inputs.h).
  std::vector<vision::ProcessedVideo> videos;
  if (!f.videos.empty()) {
    videos = prepare_videos(f.videos, *model.vision, mm_kwargs.video, stop);
    p.rendered = expand_video_placeholders(p.rendered, videos);
  }
  p.ids = model.tokenizer->encode(p.rendered, /*allow_special=*/true);
  if (!f.images.empty() || !videos.empty())
    p.multimodal = prepare_images(f.images, *model.vision, mm_kwargs.pixels, p.ids, stop, videos);
  // ChatML (Qwen's templates): each message opens with <|im_start|>; the one after the leading
  // system messages begins what differs between requests that share a system prompt.
  size_t systems = 0;
  while (systems < f.messages.size() && string_or_empty(f.messages[systems], "role") == "system") ++systems;
  // Where the next turn of this conversation stops rendering this prompt the same: after the
  // generation prompt's "<|im_start|>assistant\n". The next turn renders the reply there, and
  // not as this prompt ends it: Qwen3.5's templates close an empty think block in the generation
  // prompt when thinking is off and drop the reasoning of earlier turns, so a snapshot at the
  // prompt's end lies past what the next turn shares whenever a block boundary falls in
  // between (test_http_prefix_cache.cpp). The same prompt sent again hits here too, a block
  // short of its end at most.
  if (const auto im_start = model.tokenizer->token_id("<|im_start|>")) {
    std::vector<int64_t> opens;
    for (size_t i = 0; i < p.ids.size(); ++i)
      if (p.ids[i] == *im_start) opens.push_back(static_cast<int64_t>(i));
    if (!opens.empty() && opens.back() > 0) {
      int64_t point = opens.back();
      const std::vector<int32_t> header = model.tokenizer->encode("<|im_start|>assistant\n", /*allow_special=*/true);
      if (std::equal(header.begin(), header.end(), p.ids.begin() + point,
                     p.ids.begin() + std::min<int64_t>(point + static_cast<int64_t>(header.size()),
                                                       static_cast<int64_t>(p.ids.size()))))
        point += static_cast<int64_t>(header.size());
      p.cache_points.push_back(point);
    }
    if (systems > 0 && systems < opens.size() && opens[systems] != opens.back())
      p.cache_points.push_back(opens[systems]);
  }
  p.opens_reasoning = ReasoningSplitter::prompt_opens_reasoning(p.rendered);
  const size_t last_turn = p.rendered.rfind("<|im_start|>");
  const std::string_view turn = std::string_view(p.rendered).substr(last_turn == std::string::npos ? 0 : last_turn);
  p.reasoning = turn.find("</think>") != std::string_view::npos ? PromptReasoning::closed
                : ReasoningSplitter::prompt_opens_reasoning(turn) ? PromptReasoning::opened
                                                                  : PromptReasoning::up_to_model;
  return p;
}

}  // namespace ds::server
