// POST /v1/load_lora_adapter {lora_name, lora_path} and /v1/unload_lora_adapter {lora_name}
// (vLLM's runtime LoRA endpoints). Only with serve --allow-runtime-lora, which needs --api-key
// (server_options.h): the server's routes all sit behind the key, and these read local paths
// and change what the server serves. Answers are vLLM's: 200 with a line of text; 400 for a
// bad or taken name or a path that is not a readable adapter; 404 for unloading an unknown one.
#include <stdexcept>

#include "server/api_error.h"
#include "server/request_params.h"
#include "server/routes.h"

namespace ds::server {
namespace {

void require_runtime_lora(const RouteContext& ctx, const HttpRequest& req) {
  if (!ctx.model.runtime_lora || !ctx.model.loras) throw route_not_found(req.method, req.path);
}

std::string required_string(const Json& body, const char* key) {
  const auto v = get_string(body, key);
  if (!v || v->empty()) throw bad_request(std::string("'") + key + "' must be a non-empty string", key);
  return *v;
}

void send_text(HttpResponse& res, const std::string& text) {
  res.status = 200;
  res.content_type = "text/plain; charset=utf-8";
  res.body = text;
}

}  // namespace

void handle_load_lora_adapter(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res) {
  require_runtime_lora(ctx, req);
  const Json body = parse_json_body(req);
  const std::string name = required_string(body, "lora_name");
  const std::string path = required_string(body, "lora_path");
  try {
    ctx.model.loras->add(name, path);
  } catch (const std::invalid_argument& e) {
    throw bad_request(e.what(), "lora_name");
  } catch (const std::runtime_error& e) {
    throw bad_request(std::string("the adapter cannot be loaded: ") + e.what(), "lora_path");
  }
  send_text(res, "Success: LoRA adapter '" + name + "' added successfully.");
}

void handle_unload_lora_adapter(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res) {
  require_runtime_lora(ctx, req);
  const Json body = parse_json_body(req);
  const std::string name = required_string(body, "lora_name");
  if (!ctx.model.loras->remove(name))
    throw ApiError(404, "the LoRA adapter '" + name + "' is not loaded", "not_found_error", "lora_name", "not_found");
  send_text(res, "Success: LoRA adapter '" + name + "' removed successfully.");
}

}  // namespace ds::server
