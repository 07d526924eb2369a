// The request handlers behind HttpServer's routes, and what they share. Each handler throws
// ApiError for anything it refuses; HttpServer turns that into the error response.
#pragma once

#include <httplib.h>

#include "server/active_jobs.h"
#include "server/disconnect_watcher.h"
#include "server/json.h"
#include "server/metrics.h"
#include "server/served_model.h"

namespace ds::server {

struct RouteContext {
  const ServedModel& model;
  ServerMetrics& metrics;
  DisconnectWatcher& watcher;
  ActiveJobs& active;
};

// The body as a JSON object (400 otherwise).
Json parse_json_body(const httplib::Request& req);
// 404 unless body.model is absent or names the served model.
void check_model(const Json& body, const ServedModel& model);

void handle_chat_completions(const RouteContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_completions(const RouteContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_models(const RouteContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_model(const RouteContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_tokenize(const RouteContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(const RouteContext& ctx, const httplib::Request& req, httplib::Response& res);

void send_json(httplib::Response& res, int status, const Json& body);

}  // namespace ds::server
