// Random images for --image-size / --images-per-request: each a JPEG (as vllm bench serve's
// random multimodal dataset sends them) of tiles in random colours, different for every
// seed, so no two requests share an image (a server's encoder cache never hits) while the
// file stays small. The content does not matter to the vision encoder's cost; the size does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::bench {

// A width x height RGB JPEG (quality 85) of 32x32-pixel tiles coloured from `seed`.
std::vector<uint8_t> random_jpeg(int width, int height, uint64_t seed);

// "data:image/jpeg;base64,..." of `jpeg`.
std::string jpeg_data_url(const std::vector<uint8_t>& jpeg);

// Parses "WxH" (each side 1..16384); false when it is not of that form.
bool parse_image_size(const std::string& text, int& width, int& height);

}  // namespace ds::bench
