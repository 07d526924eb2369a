// The videos of a chat request (vLLM's video_url parts), up to the point where they join the
// images (image_inputs.h; docs/vision.md "Video"):
//  1. each video part's URL fetched under the same media policy as images (media_fetch.h),
//     decoded with the frames the video processor samples (model/vision/video_decode.h:
//     bounded by bytes, duration, frames, pixels and time) and preprocessed into temporal
//     patches with their timestamps (model/vision/video_processor.h), with the request's
//     mm_processor_kwargs fps / max_frames;
//  2. the rendered prompt's video placeholder (`<|vision_start|><|video_pad|><|vision_end|>`,
//     one per video part, placed by the chat template) replaced in the text, before
//     tokenisation as HF's Qwen3VLProcessor does, by one `<t seconds><|vision_start|>
//     <|video_pad|><|vision_end|>` per temporal patch; prepare_images then expands each pad to
//     its patch's tokens.
// Every refusal is an ApiError 400 naming the field; nothing reaches the engine unless every
// video is good.
#pragma once

#include <string>
#include <vector>

#include "model/vision/video_processor.h"
#include "server/chat_messages.h"
#include "server/image_inputs.h"
#include "server/media_fetch.h"

namespace ds::server {

inline constexpr const char* kVideoPlaceholder = "<|vision_start|><|video_pad|><|vision_end|>";

// Step 1.
std::vector<vision::ProcessedVideo> prepare_videos(const std::vector<ImageRef>& refs, const VisionServing& vision,
                                                   const vision::VideoSampling& sampling, FetchStop* stop = nullptr);

// Step 2: `rendered` with its placeholders expanded (a 400 unless it holds exactly one per
// video).
std::string expand_video_placeholders(const std::string& rendered, const std::vector<vision::ProcessedVideo>& videos);

}  // namespace ds::server
