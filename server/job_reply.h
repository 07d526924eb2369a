// Serving a started GenerationJob, whatever the shape of the reply: what every generation
// route shares -- the disconnect watch (a client that goes away has its engine requests
// cancelled at once), the registration with ActiveJobs (shutdown counts and cancels it), the
// wait on the engine, SSE headers and keep-alives -- while the route's format decides what
// is written (OpenAI chunks, Anthropic events, Responses events).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "server/generation_job.h"
#include "server/http_message.h"
#include "server/routes.h"

namespace ds::server {

// Waits for every choice of the job, handing each update to on_update in the order they
// come. Throws a 500 ApiError when a choice failed in the engine.
void run_job(const RouteContext& ctx, const HttpRequest& req, GenerationJob& job,
             const std::function<void(ChoiceUpdate&)>& on_update);

// The text of a streamed reply (SSE events), from the job's updates.
class StreamFormat {
 public:
  virtual ~StreamFormat() = default;
  // Written at once, before any token.
  virtual std::string begin(const GenerationJob& job) = 0;
  // One update; when it finishes its choice, job.choice(u.index) has the finish reason (or
  // the error).
  virtual std::string update(const GenerationJob& job, const ChoiceUpdate& u) = 0;
  // Written once every choice has finished.
  virtual std::string end(const GenerationJob& job) = 0;
};

// Makes `res` a text/event-stream that the transport writes after the handler has returned;
// the job, its watch and registration live until the last write. A failed write (the client
// left) cancels the job.
void stream_job(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res,
                std::unique_ptr<GenerationJob> job, std::unique_ptr<StreamFormat> format);

}  // namespace ds::server
