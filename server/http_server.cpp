#include "server/http_server.h"

#include <atomic>

#include <spdlog/spdlog.h>

#include "server/api_error.h"
#include "server/http_transport.h"
#include "server/routes.h"

namespace ds::server {

namespace {

enum class State { loading, ready, stopping };

// Equal strings take the same time to compare whatever their contents; the time depends
// only on the length of the expected key.
bool constant_time_equal(std::string_view given, const std::string& expected) {
  volatile unsigned char diff = given.size() == expected.size() ? 0 : 1;
  const size_t n = given.size();
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = n ? static_cast<unsigned char>(given[i % n]) : 0;
    diff = diff | (g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

// The Anthropic Messages routes answer errors in Anthropic's shape; the rest in OpenAI's.
bool anthropic_path(std::string_view path) { return path.rfind("/v1/messages", 0) == 0; }

void send_error(HttpResponse& res, const ApiError& e, bool anthropic = false) {
  res = HttpResponse{};
  res.status = e.status();
  if (e.retry_after() > 0) res.set_header("Retry-After", std::to_string(e.retry_after()));
  res.body = dump_json(anthropic ? e.anthropic_body() : e.body());
}

// The transport's own refusals in the API's error shape.
ApiError transport_error(int status, const std::string& message, size_t max_body) {
  switch (status) {
    case 413: return payload_too_large(max_body);
    case 503: return unavailable(message, "too_many_connections");
    case 500: return internal_error(message);
    default: return ApiError(status, message, "invalid_request_error", {}, status == 408 ? "request_timeout" : "");
  }
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions opt;
  ServerMetrics& metrics;
  DisconnectWatcher watcher;
  ActiveJobs active;
  std::atomic<State> state{State::loading};
  std::atomic<const ServedModel*> model{nullptr};
  HttpTransport transport;

  Impl(HttpServerOptions o, ServerMetrics& m)
      : opt(std::move(o)),
        metrics(m),
        transport(
            transport_options(opt), [this](HttpRequest& req, HttpResponse& res) { handle(req, res); },
            [this](int status, const std::string& message, HttpResponse& res) {
              send_error(res, transport_error(status, message, opt.transport.limits.max_body_bytes));
            },
            [this](const HttpRequest* req, int status) {
              metrics.count_http(status);
              if (req) spdlog::debug("{} {} {} {}", req->remote_addr, req->method, req->path, status);
            },
            // The API key is checked on the head: a client without it sends no body we read.
            [this](const HttpRequest& head, HttpResponse& refusal) {
              if (authorized(head)) return true;
              send_error(refusal, unauthorized(), anthropic_path(head.path));
              return false;
            }) {}

  static HttpTransportOptions transport_options(const HttpServerOptions& o) {
    HttpTransportOptions t = o.transport;
    t.default_headers.emplace_back("Access-Control-Allow-Origin", "*");
    return t;
  }

  // Runs a handler that needs the model; maps every failure to an OpenAI error.
  template <class Fn>
  void guarded(const HttpRequest& req, HttpResponse& res, bool generation, Fn&& fn) {
    try {
      const ServedModel* m = model.load();
      const State s = state.load();
      if (!m || s == State::loading) throw unavailable("the model is still loading; retry shortly", "model_loading");
      if (generation && s == State::stopping) throw unavailable("the server is shutting down", "shutting_down");
      RouteContext ctx{*m, metrics, watcher, active, req.socket};
      fn(ctx);
    } catch (const ApiError& e) {
      if (e.status() >= 500) spdlog::warn("{} {}: {}", req.method, req.path, e.what());
      send_error(res, e, anthropic_path(req.path));
    } catch (const std::exception& e) {
      spdlog::error("{} {}: internal error: {}", req.method, req.path, e.what());
      send_error(res, internal_error(std::string("internal error: ") + e.what()), anthropic_path(req.path));
    }
  }

  // The key as "Authorization: Bearer <key>" (OpenAI clients, Anthropic's auth token) or
  // "x-api-key: <key>" (Anthropic clients).
  bool authorized(const HttpRequest& req) const {
    if (opt.api_key.empty() || req.method == "OPTIONS" || req.path == "/health" || req.path == "/metrics") return true;
    constexpr std::string_view kBearer = "Bearer ";
    const std::string_view auth = req.header("Authorization");
    const std::string_view given = auth.substr(0, kBearer.size()) == kBearer ? auth.substr(kBearer.size()) : "";
    return constant_time_equal(given, opt.api_key) || constant_time_equal(req.header("x-api-key"), opt.api_key);
  }

  void handle(HttpRequest& req, HttpResponse& res) {
    const bool anthropic = anthropic_path(req.path);
    if (!authorized(req)) return send_error(res, unauthorized(), anthropic);
    const std::string& p = req.path;
    const std::string& m = req.method;
    if (m == "OPTIONS") {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta");
      res.set_header("Access-Control-Max-Age", "86400");
      return;
    }
    using Route = void (*)(const RouteContext&, const HttpRequest&, HttpResponse&);
    struct Entry {
      std::string_view method, path;
      Route route;
      bool generation;
    };
    static constexpr Entry kRoutes[] = {
        {"GET", "/v1/models", handle_models, false},
        {"POST", "/tokenize", handle_tokenize, false},
        {"POST", "/v1/tokenize", handle_tokenize, false},
        {"POST", "/detokenize", handle_detokenize, false},
        {"POST", "/v1/detokenize", handle_detokenize, false},
        {"POST", "/v1/chat/completions", handle_chat_completions, true},
        {"POST", "/v1/completions", handle_completions, true},
        {"POST", "/v1/messages", handle_messages, true},
        {"POST", "/v1/messages/count_tokens", handle_count_tokens, false},
        {"POST", "/v1/responses", handle_responses, true},
        {"POST", "/v1/load_lora_adapter", handle_load_lora_adapter, false},
        {"POST", "/v1/unload_lora_adapter", handle_unload_lora_adapter, false},
    };
    if (p == "/health" && m == "GET") return health(res);
    if (p == "/metrics" && m == "GET") return render_metrics(res);
    if (m == "GET" && p.rfind("/v1/models/", 0) == 0 && p.size() > 11)
      return guarded(req, res, false, [&](const RouteContext& c) { handle_model(c, req, res); });
    bool path_known = p == "/health" || p == "/metrics";
    for (const Entry& e : kRoutes) {
      if (e.path != p) continue;
      path_known = true;
      if (e.method == m) return guarded(req, res, e.generation, [&](const RouteContext& c) { e.route(c, req, res); });
    }
    if (path_known) return send_error(res, method_not_allowed(m, p), anthropic);
    send_error(res, route_not_found(m, p), anthropic);
  }

  void health(HttpResponse& res) {
    const State s = state.load();
    if (s == State::ready && model.load()) return send_json(res, 200, Json{{"status", "ok"}});
    send_error(res, s == State::stopping ? unavailable("the server is shutting down", "shutting_down")
                                         : unavailable("the model is still loading", "model_loading"));
  }

  void render_metrics(HttpResponse& res) {
    const ServedModel* m = model.load();
    if (m) {
      const auto stats = m->engine->stats();
      res.body = metrics.render(&stats);
    } else {
      res.body = metrics.render(nullptr);
    }
    res.content_type = "text/plain; version=0.0.4; charset=utf-8";
  }
};

HttpServer::HttpServer(HttpServerOptions options, ServerMetrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), metrics)) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() { return impl_->transport.bind(); }

void HttpServer::set_instance_id(const std::string& id) {
  impl_->transport.add_default_header("x-deltaserve-instance", id);
}

void HttpServer::start() { impl_->transport.start(); }

void HttpServer::set_model(const ServedModel* model) {
  impl_->model.store(model);
  impl_->state.store(model ? State::ready : State::loading);
}

void HttpServer::begin_shutdown() {
  impl_->state.store(State::stopping);
  impl_->transport.close_connections_after_replies();
}

void HttpServer::cancel_all() { impl_->active.cancel_all(); }

size_t HttpServer::active_requests() const { return impl_->active.size(); }

void HttpServer::stop() {
  if (impl_) impl_->transport.stop();
}

int HttpServer::port() const { return impl_->transport.port(); }

const HttpServerOptions& HttpServer::options() const { return impl_->opt; }

}  // namespace ds::server
