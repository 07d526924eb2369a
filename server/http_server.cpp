#include "server/http_server.h"

#include <sys/socket.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "server/api_error.h"
#include "server/connection_thread_pool.h"
#include "server/routes.h"

namespace ds::server {

namespace {

enum class State { loading, ready, stopping };

// Equal strings take the same time to compare whatever their contents; the time depends
// only on the length of the expected key.
bool constant_time_equal(const std::string& given, const std::string& expected) {
  volatile unsigned char diff = given.size() == expected.size() ? 0 : 1;
  const size_t n = given.size();
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = n ? static_cast<unsigned char>(given[i % n]) : 0;
    diff = diff | (g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  if (e.retry_after() > 0) res.set_header("Retry-After", std::to_string(e.retry_after()));
  res.set_content(dump_json(e.body()), "application/json");
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions opt;
  ServerMetrics& metrics;
  httplib::Server svr;
  DisconnectWatcher watcher;
  ActiveJobs active;
  std::atomic<State> state{State::loading};
  std::atomic<const ServedModel*> model{nullptr};
  std::thread listener;
  int bound_port = -1;

  Impl(HttpServerOptions o, ServerMetrics& m) : opt(std::move(o)), metrics(m) {}

  // Runs a handler that needs the model; maps every failure to an OpenAI error.
  template <class Fn>
  void guarded(const httplib::Request& req, httplib::Response& res, bool generation, Fn&& fn) {
    try {
      const ServedModel* m = model.load();
      const State s = state.load();
      if (!m || s == State::loading) throw unavailable("the model is still loading; retry shortly", "model_loading");
      if (generation && s == State::stopping) throw unavailable("the server is shutting down", "shutting_down");
      RouteContext ctx{*m, metrics, watcher, active};
      fn(ctx);
    } catch (const ApiError& e) {
      if (e.status() >= 500) spdlog::warn("{} {}: {}", req.method, req.path, e.what());
      send_error(res, e);
    } catch (const std::exception& e) {
      spdlog::error("{} {}: internal error: {}", req.method, req.path, e.what());
      send_error(res, internal_error(std::string("internal error: ") + e.what()));
    }
  }

  void routes() {
    using httplib::Request;
    using httplib::Response;
    svr.new_task_queue = [n = opt.max_threads] { return new ConnectionThreadPool(n); };
    // Only SO_REUSEADDR: httplib's default also sets SO_REUSEPORT, which would let a second
    // server bind the same port silently instead of failing.
    svr.set_socket_options([](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    svr.set_payload_max_length(opt.max_body_bytes);
    svr.set_keep_alive_max_count(1000);
    svr.set_default_headers({{"Access-Control-Allow-Origin", "*"}});

    svr.set_pre_routing_handler([this](const Request& req, Response& res) {
      if (opt.api_key.empty() || req.method == "OPTIONS" || req.path == "/health" || req.path == "/metrics")
        return httplib::Server::HandlerResponse::Unhandled;
      const std::string auth = req.get_header_value("Authorization");
      constexpr std::string_view kBearer = "Bearer ";
      const std::string given = auth.rfind(kBearer, 0) == 0 ? auth.substr(kBearer.size()) : std::string();
      if (constant_time_equal(given, opt.api_key)) return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, unauthorized());
      return httplib::Server::HandlerResponse::Handled;
    });
    // httplib's own errors (no route, body too large, unreadable request) get an OpenAI
    // body; responses that already have one are left alone.
    svr.set_error_handler([this](const Request& req, Response& res) {
      if (!res.body.empty() || res.is_chunked_content_provider_) return;
      if (res.status == 404) return send_error(res, route_not_found(req.method, req.path));
      if (res.status == 413) return send_error(res, payload_too_large(opt.max_body_bytes));
      if (res.status == 400) return send_error(res, bad_request("malformed HTTP request"));
      send_error(res, ApiError(res.status, "HTTP error " + std::to_string(res.status), "invalid_request_error"));
    });
    svr.set_exception_handler([](const Request& req, Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      spdlog::error("{} {}: internal error: {}", req.method, req.path, what);
      send_error(res, internal_error("internal error: " + what));
    });
    svr.set_logger([this](const Request& req, const Response& res) {
      metrics.count_http(res.status);
      spdlog::debug("{} {} {} {}", req.remote_addr, req.method, req.path, res.status);
    });

    svr.Options(R"(.*)", [](const Request&, Response& res) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "86400");
    });

    svr.Get("/health", [this](const Request&, Response& res) {
      const State s = state.load();
      if (s == State::ready && model.load()) return send_json(res, 200, Json{{"status", "ok"}});
      send_error(res, s == State::stopping ? unavailable("the server is shutting down", "shutting_down")
                                           : unavailable("the model is still loading", "model_loading"));
    });
    svr.Get("/metrics", [this](const Request&, Response& res) {
      const ServedModel* m = model.load();
      std::string text;
      if (m) {
        const auto stats = m->engine->stats();
        text = metrics.render(&stats);
      } else {
        text = metrics.render(nullptr);
      }
      res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
    });
    svr.Get("/v1/models", [this](const Request& req, Response& res) {
      guarded(req, res, false, [&](const RouteContext& c) { handle_models(c, req, res); });
    });
    svr.Get(R"(/v1/models/(.+))", [this](const Request& req, Response& res) {
      guarded(req, res, false, [&](const RouteContext& c) { handle_model(c, req, res); });
    });
    for (const char* path : {"/tokenize", "/v1/tokenize"})
      svr.Post(path, [this](const Request& req, Response& res) {
        guarded(req, res, false, [&](const RouteContext& c) { handle_tokenize(c, req, res); });
      });
    for (const char* path : {"/detokenize", "/v1/detokenize"})
      svr.Post(path, [this](const Request& req, Response& res) {
        guarded(req, res, false, [&](const RouteContext& c) { handle_detokenize(c, req, res); });
      });
    svr.Post("/v1/chat/completions", [this](const Request& req, Response& res) {
      guarded(req, res, true, [&](const RouteContext& c) { handle_chat_completions(c, req, res); });
    });
    svr.Post("/v1/completions", [this](const Request& req, Response& res) {
      guarded(req, res, true, [&](const RouteContext& c) { handle_completions(c, req, res); });
    });
  }
};

HttpServer::HttpServer(HttpServerOptions options, ServerMetrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), metrics)) {
  impl_->routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  auto& i = *impl_;
  const auto& o = i.opt;
  if (o.port == 0) {
    i.bound_port = i.svr.bind_to_any_port(o.host);
  } else {
    i.bound_port = i.svr.bind_to_port(o.host, o.port) ? o.port : -1;
  }
  if (i.bound_port <= 0)
    throw std::runtime_error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                             " (is the port in use, or the address not on this machine?)");
  return i.bound_port;
}

void HttpServer::start() {
  impl_->listener = std::thread([this] { impl_->svr.listen_after_bind(); });
}

void HttpServer::set_model(const ServedModel* model) {
  impl_->model.store(model);
  impl_->state.store(model ? State::ready : State::loading);
}

void HttpServer::begin_shutdown() { impl_->state.store(State::stopping); }

void HttpServer::cancel_all() { impl_->active.cancel_all(); }

size_t HttpServer::active_requests() const { return impl_->active.size(); }

void HttpServer::stop() {
  if (!impl_) return;
  impl_->svr.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

int HttpServer::port() const { return impl_->bound_port; }

const HttpServerOptions& HttpServer::options() const { return impl_->opt; }

}  // namespace ds::server
