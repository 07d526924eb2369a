// The images of a chat request, from their URLs to what the engine takes
// (scheduler::MultimodalInput; docs/vision.md):
//  1. each image part's URL fetched under the media policy (media_fetch.h), decoded
//     (model/vision/decode.h) and preprocessed with the checkpoint's processor settings and the
//     request's mm_processor_kwargs (min_pixels / max_pixels, as vLLM takes them);
//  2. a content hash of each preprocessed image (SHA-256 of its grid and pixels): the encoder
//     cache's key and the prefix cache's view of its pads;
//  3. the rendered prompt's image pads (one per image, placed by the chat template) expanded
//     to each image's token count, and the prompt's M-RoPE layout.
// Bounded: at most --limit-mm-per-prompt images, each within the policy's bytes, the
// decoder's pixel and time limits and the processor's max_pixels (mm_processor_kwargs may not
// raise either bound above it). Every refusal is an ApiError
// 400 naming the field; nothing is handed to the engine unless all images are good.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/vision/decode.h"
#include "model/vision/processor.h"
#include "model/vision/video_processor.h"
#include "scheduler/request.h"
#include "server/chat_messages.h"
#include "server/json.h"
#include "server/media_fetch.h"

namespace ds::server {

// What the server needs to take images and videos for its model (null in ServedModel: it
// takes none).
struct VisionServing {
  vision::ImageProcessorConfig processor;
  int32_t image_token_id = -1;
  int64_t merge_size = 2;
  int64_t max_images = 8;  // per prompt (--limit-mm-per-prompt)
  MediaPolicy media;
  vision::DecodeLimits decode;
  // Videos (video_inputs.h); video_token_id -1: the model takes none.
  vision::VideoProcessorConfig video;
  int32_t video_token_id = -1;
  int64_t max_videos = 1;  // per prompt (--limit-mm-per-prompt)
  vision::VideoLimits video_decode;
  int64_t max_patch_tokens = 0;  // tokens of one temporal patch at most (the encoder's step budget; 0: none)
  std::string video_unusable = "it has no video processor";  // why, when video_token_id is -1
};

// mm_processor_kwargs of a request body.
struct MmProcessorKwargs {
  vision::PixelBounds pixels;   // min_pixels, max_pixels (images)
  vision::VideoSampling video;  // fps, max_frames (videos)
};
// {"min_pixels": n, "max_pixels": n, "fps": x, "max_frames": n}; 400 for other keys or values
// out of range (fps in (0, 60], max_frames from 2 to 4096).
MmProcessorKwargs parse_mm_processor_kwargs(const Json& body);

// Steps 1-3 above. ids: the rendered prompt's tokens, expanded in place; stop: ends the
// fetches when the client leaves (client_watch.h), or null. videos: the prompt's videos,
// already prepared (video_inputs.h; the rendered text holds one pad per temporal patch): each
// patch's pad is expanded like an image's and the patch joins the images in prompt order.
std::shared_ptr<const scheduler::MultimodalInput> prepare_images(const std::vector<ImageRef>& refs,
                                                                  const VisionServing& vision,
                                                                  const vision::PixelBounds& bounds,
                                                                  std::vector<int32_t>& ids, FetchStop* stop = nullptr,
                                                                  const std::vector<vision::ProcessedVideo>& videos = {});

// SHA-256 of an image's grid and pixels (32 bytes); a video's temporal patch hashes all its
// frames.
std::string image_hash(const vision::ProcessedImage& image);

}  // namespace ds::server
