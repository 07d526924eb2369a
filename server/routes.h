// The request handlers behind HttpServer's routes, and what they share. Each handler throws
// ApiError for anything it refuses; HttpServer turns that into the error response.
#pragma once

#include "server/active_jobs.h"
#include "server/disconnect_watcher.h"
#include "server/http_message.h"
#include "server/json.h"
#include "server/metrics.h"
#include "server/served_model.h"

namespace ds::server {

struct RouteContext {
  const ServedModel& model;
  ServerMetrics& metrics;
  DisconnectWatcher& watcher;
  ActiveJobs& active;
  int socket = -1;  // the request's connection (HttpRequest::socket), for `watcher`
};

// The body as a JSON object nested at most kMaxJsonDepth deep (400 otherwise), whatever the
// Content-Type said (curl -d sends form encoding).
Json parse_json_body(const HttpRequest& req);
// What body.model names: the served model (or nothing: an empty choice) or one of its LoRA
// adapters (lora_registry.h); 404 otherwise.
LoraChoice check_model(const Json& body, const ServedModel& model);
// The model a reply names: the adapter the request chose, or the served model.
inline const std::string& reply_model(const LoraChoice& lora, const ServedModel& model) {
  return lora.id != 0 ? lora.name : model.name;
}

void handle_chat_completions(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_completions(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_messages(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_count_tokens(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_responses(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_models(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_model(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_tokenize(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_detokenize(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res);
// vLLM's runtime LoRA endpoints (lora_routes.cpp); 404 unless serve --allow-runtime-lora.
void handle_load_lora_adapter(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_unload_lora_adapter(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res);

void send_json(HttpResponse& res, int status, const Json& body);

}  // namespace ds::server
