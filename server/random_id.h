// Random identifiers for responses ("chatcmpl-...", "cmpl-...") and tool calls ("call_...").
// They only need to be unique, not secret: a per-thread generator seeded from random_device.
#pragma once

#include <string>
#include <string_view>

namespace ds::server {

// prefix + `length` characters from [A-Za-z0-9].
std::string random_id(std::string_view prefix, int length = 24);

}  // namespace ds::server
