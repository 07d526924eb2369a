#include "server/image_inputs.h"

#include <openssl/evp.h>

#include "server/api_error.h"

namespace ds::server {

vision::PixelBounds parse_mm_processor_kwargs(const Json& body) {
  vision::PixelBounds b;
  if (!body.contains("mm_processor_kwargs") || body["mm_processor_kwargs"].is_null()) return b;
  const Json& kw = body["mm_processor_kwargs"];
  if (!kw.is_object()) throw bad_request("'mm_processor_kwargs' must be an object", "mm_processor_kwargs");
  for (const auto& [key, v] : kw.items()) {
    const std::string at = "mm_processor_kwargs." + key;
    if (key != "min_pixels" && key != "max_pixels")
      throw unsupported_field(at, "only min_pixels and max_pixels are accepted");
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 31))
      throw bad_request("'" + at + "' must be an integer from 1 to 2^31", at);
    (key == "min_pixels" ? b.min_pixels : b.max_pixels) = v.get<int64_t>();
  }
  return b;
}

std::string image_hash(const vision::ProcessedImage& im) {
  std::string out(32, '\0');
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const int64_t dims[3] = {im.grid_t, im.grid_h, im.grid_w};
  unsigned int len = 0;
  const bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, dims, sizeof dims) == 1 &&
                  EVP_DigestUpdate(ctx, im.resized.rgb.data(), im.resized.rgb.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx, reinterpret_cast<unsigned char*>(out.data()), &len) == 1 && len == 32;
  EVP_MD_CTX_free(ctx);
  if (!ok) throw std::runtime_error("image_hash: SHA-256 failed");
  return out;
}

std::shared_ptr<const scheduler::MultimodalInput> prepare_images(const std::vector<ImageRef>& refs,
                                                                  const VisionServing& v,
                                                                  const vision::PixelBounds& bounds,
                                                                  std::vector<int32_t>& ids, FetchStop* stop) {
  if (static_cast<int64_t>(refs.size()) > v.max_images)
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
  // The template put one pad per image part; each becomes its image's tokens.
  size_t pads = 0;
  for (int32_t t : ids) pads += t == v.image_token_id;
  if (pads != refs.size())
    throw bad_request("the chat template placed " + std::to_string(pads) + " image placeholders for " +
                          std::to_string(refs.size()) + " images (an image in a message the template does not "
                          "render, or '<|image_pad|>' in the text)",
                      "messages");
  std::vector<int32_t> out;
  std::vector<qwen35::PromptImageSpan> spans;
  size_t k = 0;
  for (int32_t t : ids) {
    if (t != v.image_token_id) {
      out.push_back(t);
      continue;
    }
    const vision::ProcessedImage& im = *mm->images[k++].pixels;
    qwen35::PromptImageSpan s{static_cast<int64_t>(out.size()), im.grid_t, im.grid_h / v.merge_size,
                              im.grid_w / v.merge_size};
    out.insert(out.end(), static_cast<size_t>(s.tokens()), v.image_token_id);
    spans.push_back(s);
  }
  mm->layout = qwen35::MultimodalPrompt::make(static_cast<int64_t>(out.size()), std::move(spans));
  ids = std::move(out);
  return mm;
}

}  // namespace ds::server
