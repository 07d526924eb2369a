// ApiError: an OpenAI-shaped error that a request handler throws and the HTTP layer answers.
//
// The body is what OpenAI clients (and their SDKs' error classes) expect:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "top_p", "code": null}}
// The status picks the SDK error class (400 BadRequestError, 401 AuthenticationError, 404
// NotFoundError, 405, 408, 413 (body too large), 429 RateLimitError, 503, 500 InternalServerError). The helpers below
// are the only places that choose a type/code string, so every route answers alike.
#pragma once

#include <stdexcept>
#include <string>

#include "server/json.h"

namespace ds::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string type, std::string param = {},
           std::string code = {})
      : std::runtime_error(message), status_(status), type_(std::move(type)),
        param_(std::move(param)), code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  // Seconds a client should wait before retrying (429/503); 0 = no Retry-After header.
  int retry_after() const { return retry_after_; }
  ApiError& with_retry_after(int seconds) {
    retry_after_ = seconds;
    return *this;
  }

  Json body() const;
  // The same error as the Anthropic Messages API shapes it (/v1/messages):
  //   {"type": "error", "error": {"type": "invalid_request_error", "message": "..."}}
  // with Anthropic's type for the status (authentication_error, not_found_error,
  // request_too_large, rate_limit_error, overloaded_error, api_error, ...).
  Json anthropic_body() const;

 private:
  int status_;
  std::string type_, param_, code_;
  int retry_after_ = 0;
};

// 400: a malformed body or a parameter we refuse; `param` names the field.
ApiError bad_request(const std::string& message, const std::string& param = {});
// 400 for a field we do not implement (OpenAI's shape for unsupported parameters).
ApiError unsupported_field(const std::string& field, const std::string& why = {});
ApiError unauthorized();
ApiError model_not_found(const std::string& model);
ApiError route_not_found(const std::string& method, const std::string& path);
ApiError method_not_allowed(const std::string& method, const std::string& path);
ApiError context_too_long(const std::string& message, const std::string& param);
ApiError payload_too_large(size_t limit_bytes);
ApiError queue_full(const std::string& message);
ApiError unavailable(const std::string& message, const std::string& code);
// 499 (nginx's "client closed request"): the client left before its request could start.
ApiError client_closed(const std::string& message);
ApiError internal_error(const std::string& message);

}  // namespace ds::server
