#include "programs/bench_serve/request_body.h"

#include <stdexcept>

namespace ds::bench {

RequestBody::RequestBody(const BenchOptions& o, std::string model)
    : chat_(is_chat_endpoint(o)), route_(o.endpoint) {
  base_["model"] = std::move(model);
  base_["stream"] = true;
  base_["stream_options"] = {{"include_usage", true}};
  if (o.ignore_eos) base_["ignore_eos"] = true;
  if (o.temperature) base_["temperature"] = *o.temperature;
  if (!o.extra_body.empty()) {
    extra_ = Json::parse(o.extra_body, nullptr, false);
    if (!extra_.is_object()) throw std::invalid_argument("--extra-body must be a JSON object");
  }
}

std::string RequestBody::make(const Json& input, int max_tokens) const {
  Json body = base_;
  body[chat_ ? "messages" : "prompt"] = input;
  body[chat_ ? "max_completion_tokens" : "max_tokens"] = max_tokens;
  if (!extra_.is_null()) body.merge_patch(extra_);
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace ds::bench
