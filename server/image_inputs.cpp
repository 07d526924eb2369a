#include "server/image_inputs.h"

#include <algorithm>

#include <openssl/evp.h>

#include "server/api_error.h"

namespace ds::server {

MmProcessorKwargs parse_mm_processor_kwargs(const Json& body) {
  MmProcessorKwargs out;
  vision::PixelBounds& b = out.pixels;
  if (!body.contains("mm_processor_kwargs") || body["mm_processor_kwargs"].is_null()) return out;
  const Json& kw = body["mm_processor_kwargs"];
  if (!kw.is_object()) throw bad_request("'mm_processor_kwargs' must be an object", "mm_processor_kwargs");
  for (const auto& [key, v] : kw.items()) {
    const std::string at = "mm_processor_kwargs." + key;
    if (key == "fps") {
      if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > 60)
        throw bad_request("'" + at + "' must be a number above 0 and at most 60", at);
      out.video.fps = v.get<double>();
      continue;
    }
    if (key == "max_frames") {
      if (!v.is_number_integer() || v.get<int64_t>() < 2 || v.get<int64_t>() > 4096)
        throw bad_request("'" + at + "' must be an integer from 2 to 4096", at);
      out.video.max_frames = v.get<int64_t>();
      continue;
    }
    if (key != "min_pixels" && key != "max_pixels")
      throw unsupported_field(at, "only min_pixels, max_pixels, fps and max_frames are accepted");
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 31))
      throw bad_request("'" + at + "' must be an integer from 1 to 2^31", at);
    (key == "min_pixels" ? b.min_pixels : b.max_pixels) = v.get<int64_t>();
  }
  return out;
}

std::string image_hash(const vision::ProcessedImage& im) {
  std::string out(32, '\0');
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const int64_t dims[3] = {im.grid_t, im.grid_h, im.grid_w};
  unsigned int len = 0;
  const bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, dims, sizeof dims) == 1 &&
                  EVP_DigestUpdate(ctx, im.resized.rgb.data(), im.resized.rgb.size()) == 1 &&
                  std::all_of(im.later.begin(), im.later.end(), [&](const vision::RgbImage& f) {
                    return EVP_DigestUpdate(ctx, f.rgb.data(), f.rgb.size()) == 1;
                  }) &&
                  EVP_DigestFinal_ex(ctx, reinterpret_cast<unsigned char*>(out.data()), &len) == 1 && len == 32;
  EVP_MD_CTX_free(ctx);
  if (!ok) throw std::runtime_error("image_hash: SHA-256 failed");
  return out;
}

std::shared_ptr<const scheduler::MultimodalInput> prepare_images(const std::vector<ImageRef>& refs,
                                                                  const VisionServing& v,
                                                                  const vision::PixelBounds& bounds,
                                                                  std::vector<int32_t>& ids, FetchStop* stop,
                                                                  const std::vector<vision::ProcessedVideo>& videos) {
  if (!refs.empty() && static_cast<int64_t>(refs.size()) > v.max_images)
    throw bad_request("the request has " + std::to_string(refs.size()) + " images; at most " +
                          std::to_string(v.max_images) + " are allowed per prompt (--limit-mm-per-prompt)",
                      refs[static_cast<size_t>(v.max_images)].field);
  // A request may move the resize bounds (vLLM's mm_processor_kwargs) but not past the
  // checkpoint's max_pixels: min_pixels would otherwise enlarge any image to 2^31 pixels.
  for (const auto& [name, value] : {std::pair{"min_pixels", bounds.min_pixels}, {"max_pixels", bounds.max_pixels}})
    if (value && *value > v.processor.max_pixels)
      throw bad_request("'mm_processor_kwargs." + std::string(name) + "' is " + std::to_string(*value) +
                            "; this model's images are at most " + std::to_string(v.processor.max_pixels) +
                            " pixels (its preprocessor_config.json)",
                        "mm_processor_kwargs." + std::string(name));
  auto mm = std::make_shared<scheduler::MultimodalInput>();
  for (const ImageRef& r : refs) {
    const std::vector<uint8_t> bytes = fetch_media(r.url, v.media, r.field, stop);
    try {
      auto px = std::make_shared<vision::ProcessedImage>(
          vision::preprocess(vision::decode_image(bytes, v.decode), v.processor, bounds));
      mm->images.push_back({px, image_hash(*px)});
    } catch (const vision::ImageError& e) {
      throw ApiError(400, std::string("the image could not be used: ") + e.what(), "invalid_request_error", r.field,
                     "invalid_image");
    }
  }
  // A video's temporal patches, in order; each is one pad in the text (video_inputs.h).
  std::vector<scheduler::RequestImage> patches;
  for (const vision::ProcessedVideo& pv : videos)
    for (const vision::ProcessedImage& p : pv.patches) {
      auto px = std::make_shared<vision::ProcessedImage>(p);
      const std::string hash = image_hash(*px);
      patches.push_back({std::move(px), hash});
    }
  // The template put one pad per image part (and the video expansion one per temporal patch);
  // each becomes its image's tokens.
  size_t pads = 0, video_pads = 0;
  for (int32_t t : ids) {
    pads += t == v.image_token_id;
    video_pads += v.video_token_id >= 0 && t == v.video_token_id;
  }
  if (pads != refs.size())
    throw bad_request("the chat template placed " + std::to_string(pads) + " image placeholders for " +
                          std::to_string(refs.size()) + " images (an image in a message the template does not "
                          "render, or '<|image_pad|>' in the text)",
                      "messages");
  if (video_pads != patches.size())
    throw bad_request("the prompt holds " + std::to_string(video_pads) + " video placeholders for " +
                          std::to_string(patches.size()) + " temporal patches of its videos ('<|video_pad|>' in the text)",
                      "messages");
  std::vector<scheduler::RequestImage> ordered;
  std::vector<int32_t> out;
  std::vector<qwen35::PromptImageSpan> spans;
  size_t k = 0, kv = 0;
  for (int32_t t : ids) {
    const bool image = t == v.image_token_id, video = v.video_token_id >= 0 && t == v.video_token_id;
    if (!image && !video) {
      out.push_back(t);
      continue;
    }
    ordered.push_back(image ? std::move(mm->images[k++]) : std::move(patches[kv++]));
    const vision::ProcessedImage& im = *ordered.back().pixels;
    qwen35::PromptImageSpan s{static_cast<int64_t>(out.size()), im.grid_t, im.grid_h / v.merge_size,
                              im.grid_w / v.merge_size};
    out.insert(out.end(), static_cast<size_t>(s.tokens()), t);
    spans.push_back(s);
  }
  mm->images = std::move(ordered);
  mm->layout = qwen35::MultimodalPrompt::make(static_cast<int64_t>(out.size()), std::move(spans));
  ids = std::move(out);
  return mm;
}

}  // namespace ds::server
