#include "server/video_inputs.h"

#include "server/api_error.h"

namespace ds::server {

std::vector<vision::ProcessedVideo> prepare_videos(const std::vector<ImageRef>& refs, const VisionServing& v,
                                                   const vision::VideoSampling& sampling, FetchStop* stop) {
  std::vector<vision::ProcessedVideo> out;
  if (refs.empty()) return out;
  if (v.video_token_id < 0)
    throw ApiError(400, "this server does not take videos: " + v.video_unusable, "invalid_request_error",
                   refs.front().field, "model_not_multimodal");
  if (static_cast<int64_t>(refs.size()) > v.max_videos)
    throw bad_request("the request has " + std::to_string(refs.size()) + " videos; at most " +
                          std::to_string(v.max_videos) + " are allowed per prompt (--limit-mm-per-prompt)",
                      refs[static_cast<size_t>(v.max_videos)].field);
  // A request may ask for fewer frames, or another rate, but not for more frames than the
  // checkpoint's processor keeps (the decode and encoder cost grow with them).
  if (sampling.max_frames && *sampling.max_frames > v.video.max_frames)
    throw bad_request("'mm_processor_kwargs.max_frames' is " + std::to_string(*sampling.max_frames) +
                          "; this model keeps at most " + std::to_string(v.video.max_frames) +
                          " frames a video (its video_preprocessor_config.json)",
                      "mm_processor_kwargs.max_frames");
  const vision::FrameChooser choose = vision::frame_chooser(v.video, sampling);
  for (const ImageRef& r : refs) {
    const std::vector<uint8_t> bytes = fetch_media(r.url, v.media, r.field, stop, "video");
    try {
      // Each kept frame is resized as it is decoded: the request holds the processor's pixel
      // budget, not its frames at the source's size.
      vision::ProcessedVideo pv = vision::preprocess_video(
          vision::decode_video(bytes, v.video_decode, choose, vision::frame_resizer(v.video)), v.video);
      for (const vision::ProcessedImage& p : pv.patches)
        if (v.max_patch_tokens > 0 && p.num_tokens(v.merge_size) > v.max_patch_tokens)
          throw vision::ImageError("a frame of " + std::to_string(p.num_tokens(v.merge_size)) +
                                   " tokens is larger than the encoder's step (" + std::to_string(v.max_patch_tokens) +
                                   " tokens)");
      out.push_back(std::move(pv));
    } catch (const vision::ImageError& e) {
      throw ApiError(400, std::string("the video could not be used: ") + e.what(), "invalid_request_error", r.field,
                     "invalid_video");
    }
  }
  return out;
}

std::string expand_video_placeholders(const std::string& rendered, const std::vector<vision::ProcessedVideo>& videos) {
  const std::string placeholder = kVideoPlaceholder;
  std::string out;
  size_t at = 0, k = 0;
  for (size_t hit = rendered.find(placeholder); hit != std::string::npos; hit = rendered.find(placeholder, at)) {
    if (k == videos.size()) {
      k = videos.size() + 1;  // one too many
      break;
    }
    out.append(rendered, at, hit - at);
    for (double t : videos[k].timestamps) out += vision::timestamp_text(t) + placeholder;
    at = hit + placeholder.size();
    ++k;
  }
  if (k != videos.size())
    throw bad_request("the chat template placed " + std::string(k > videos.size() ? "more" : "fewer") +
                          " video placeholders than the request has videos (" + std::to_string(videos.size()) +
                          "): a video in a message the template does not render, or the placeholder in the text",
                      "messages");
  out.append(rendered, at, std::string::npos);
  return out;
}

}  // namespace ds::server
