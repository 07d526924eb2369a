#include "server/api_error.h"

namespace ds::server {

Json ApiError::body() const {
  Json e = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (!param_.empty()) e["param"] = param_;
  if (!code_.empty()) e["code"] = code_;
  return {{"error", std::move(e)}};
}

Json ApiError::anthropic_body() const {
  const char* type = "invalid_request_error";
  switch (status_) {
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: type = "overloaded_error"; break;
    default: if (status_ >= 500) type = "api_error"; break;
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", what()}}}};
}

ApiError bad_request(const std::string& message, const std::string& param) {
  return ApiError(400, message, "invalid_request_error", param);
}

ApiError unsupported_field(const std::string& field, const std::string& why) {
  std::string m = "'" + field + "' is not supported by this server";
  if (!why.empty()) m += ": " + why;
  return ApiError(400, m, "invalid_request_error", field, "unsupported_parameter");
}

ApiError unauthorized() {
  return ApiError(401, "invalid or missing API key (send 'Authorization: Bearer <key>' or 'x-api-key: <key>')",
                  "authentication_error", {}, "invalid_api_key");
}

ApiError model_not_found(const std::string& model) {
  return ApiError(404, "the model '" + model + "' does not exist on this server (see GET /v1/models)",
                  "invalid_request_error", "model", "model_not_found");
}

ApiError route_not_found(const std::string& method, const std::string& path) {
  return ApiError(404, "no route for " + method + " " + path, "not_found_error", {}, "not_found");
}

ApiError method_not_allowed(const std::string& method, const std::string& path) {
  return ApiError(405, path + " does not accept " + method, "invalid_request_error", {}, "method_not_allowed");
}

ApiError context_too_long(const std::string& message, const std::string& param) {
  return ApiError(400, message, "invalid_request_error", param, "context_length_exceeded");
}

ApiError payload_too_large(size_t limit_bytes) {
  return ApiError(413, "the request body exceeds the limit of " + std::to_string(limit_bytes) + " bytes",
                  "invalid_request_error", {}, "payload_too_large");
}

ApiError queue_full(const std::string& message) {
  ApiError e(429, message + "; retry later", "rate_limit_error", {}, "rate_limit_exceeded");
  e.with_retry_after(1);
  return e;
}

ApiError unavailable(const std::string& message, const std::string& code) {
  ApiError e(503, message, "service_unavailable_error", {}, code);
  e.with_retry_after(1);
  return e;
}

ApiError client_closed(const std::string& message) {
  return ApiError(499, message, "invalid_request_error", {}, "client_closed_request");
}

ApiError internal_error(const std::string& message) {
  return ApiError(500, message, "server_error", {}, "internal_error");
}

}  // namespace ds::server
