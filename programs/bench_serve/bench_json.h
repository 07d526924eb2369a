// The JSON type of bench_serve: ordered, so request bodies and the result file keep the key
// order they are written in (the result file reads like vllm bench serve's).
#pragma once

#include <nlohmann/json.hpp>

namespace ds::bench {

using Json = nlohmann::ordered_json;

}  // namespace ds::bench
