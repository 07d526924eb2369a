// Standard base64 (RFC 4648: padding required, no whitespace or line breaks), for data: URLs.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace ds::server {

// false (out unspecified) on malformed input.
bool decode_base64(std::string_view in, std::vector<uint8_t>& out);

}  // namespace ds::server
