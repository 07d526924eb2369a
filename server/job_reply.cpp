#include "server/job_reply.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "server/api_error.h"

namespace ds::server {

namespace {

// Cancels the job's engine requests as soon as the client's connection closes.
class ConnectionWatch {
 public:
  ConnectionWatch(DisconnectWatcher& w, const HttpRequest& req, scheduler::Engine* engine,
                  std::vector<scheduler::RequestId> ids)
      : watcher_(w) {
    token_ = watcher_.watch(req.socket, [engine, ids = std::move(ids)] {
      for (auto id : ids) engine->cancel(id);
    });
    if (token_ == 0) spdlog::debug("cannot watch {}:{}; a disconnect will only show as a failed write", req.remote_addr, req.remote_port);
  }
  ~ConnectionWatch() { watcher_.unwatch(token_); }
  ConnectionWatch(const ConnectionWatch&) = delete;
  ConnectionWatch& operator=(const ConnectionWatch&) = delete;

 private:
  DisconnectWatcher& watcher_;
  DisconnectWatcher::Token token_ = 0;
};

// Everything a streaming reply needs after the handler has returned (the transport calls the
// response's stream afterwards, on the same thread, and releases it after the last write).
struct StreamState {
  std::unique_ptr<GenerationJob> job;
  std::unique_ptr<StreamFormat> format;
  std::unique_ptr<ConnectionWatch> watch;
  ActiveJobs::Registration registration;

  // Writes the whole stream; false when the client went away (the job is cancelled).
  bool pump(const BodyWriter& write) {
    auto send = [&](const std::string& text) { return text.empty() || write(text); };
    auto gone = [&] {
      job->cancel();
      return false;
    };
    if (!send(format->begin(*job))) return gone();
    auto last_write = std::chrono::steady_clock::now();
    while (!job->done()) {
      auto updates = job->next(std::chrono::milliseconds(1000));
      const auto now = std::chrono::steady_clock::now();
      if (updates.empty()) {
        // A comment line keeps proxies from timing out a request that waits in the queue.
        if (now - last_write > std::chrono::seconds(15)) {
          if (!write(": keep-alive\n\n")) return gone();
          last_write = now;
        }
        continue;
      }
      for (const auto& u : updates)
        if (!send(format->update(*job, u))) return gone();
      last_write = now;
    }
    if (!send(format->end(*job))) return gone();
    return true;
  }
};

}  // namespace

void run_job(const RouteContext& ctx, const HttpRequest& req, GenerationJob& job,
             const std::function<void(ChoiceUpdate&)>& on_update) {
  ConnectionWatch watch(ctx.watcher, req, ctx.model.engine, job.ids());
  auto registration = ctx.active.add(ctx.model.engine, job.ids());
  while (!job.done())
    for (auto& u : job.next(std::chrono::milliseconds(1000))) on_update(u);
  for (size_t i = 0; i < job.size(); ++i)
    if (*job.choice(i).finish_reason() == "error") throw internal_error("generation failed: " + job.choice(i).error());
}

void stream_job(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res,
                std::unique_ptr<GenerationJob> job, std::unique_ptr<StreamFormat> format) {
  auto st = std::make_shared<StreamState>();
  st->job = std::move(job);
  st->format = std::move(format);
  st->watch = std::make_unique<ConnectionWatch>(ctx.watcher, req, ctx.model.engine, st->job->ids());
  st->registration = ctx.active.add(ctx.model.engine, st->job->ids());
  res.status = 200;
  res.content_type = "text/event-stream";
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  // The stream's state (watch, registration, job) is released with the response, after the
  // last write: an unfinished job is cancelled by its destructor.
  res.stream = [st](const BodyWriter& write) { st->pump(write); };
}

}  // namespace ds::server
