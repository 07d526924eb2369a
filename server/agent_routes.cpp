// POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages) and POST /v1/responses
// (OpenAI Responses, stateless): each request is translated into an OpenAI chat body
// (messages_request.h, responses_request.h) and runs through the chat pipeline (start_job.h,
// job_reply.h); its one choice's deltas are written by the API's writer (messages_reply.h,
// responses_reply.h), whole or streamed.
#include <ctime>
#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/client_watch.h"
#include "server/job_reply.h"
#include "server/messages_reply.h"
#include "server/messages_request.h"
#include "server/random_id.h"
#include "server/request_params.h"
#include "server/responses_reply.h"
#include "server/responses_request.h"
#include "server/routes.h"
#include "server/start_job.h"

namespace ds::server {

namespace {

using FieldNames = std::vector<std::pair<std::string_view, std::string_view>>;

// An error raised on the translated chat body, naming the fields as the client sent them: a
// chat field, or a path under it ('response_format.json_schema.schema'), becomes the client's
// spelling. Entries are tried in order, so a longer chat path goes before its prefix.
ApiError in_client_terms(const ApiError& e, const FieldNames& names) {
  std::string message = e.what();
  std::string param = e.param();
  for (const auto& [chat, client] : names) {
    if (param == chat || param.rfind(std::string(chat) + ".", 0) == 0) param = std::string(client) + param.substr(chat.size());
    for (const char end : {'\'', '.'}) {
      const std::string quoted = "'" + std::string(chat) + end;
      const std::string renamed = "'" + std::string(client) + end;
      for (size_t at = message.find(quoted); at != std::string::npos; at = message.find(quoted, at + renamed.size()))
        message.replace(at, quoted.size(), renamed);
    }
  }
  ApiError out(e.status(), message, e.type(), param, e.code());
  out.with_retry_after(e.retry_after());
  return out;
}

// Runs fn (parsing and starting a job from a chat body), renaming fields in its errors.
template <class Fn>
auto with_client_fields(const FieldNames& names, Fn&& fn) {
  try {
    return fn();
  } catch (const ApiError& e) {
    throw in_client_terms(e, names);
  }
}

// Why a finished choice has no reply to give (the engine failed it, or it was cancelled
// before its end: a shutdown's cancel_all), else empty.
std::string failure(const ChoiceOutput& c) {
  if (*c.finish_reason() == "error") return "generation failed: " + c.error();
  if (*c.finish_reason() == "abort") return "the request was cancelled before it finished";
  return {};
}

ApiError failure_error(const ChoiceOutput& c) {
  return *c.finish_reason() == "abort" ? unavailable(failure(c), "cancelled") : internal_error(failure(c));
}

// As the request sent it, else the sampler's value as a short decimal (0.7, not 0.69999...).
double echoed(const Json& body, const char* key, float used) {
  if (body.contains(key) && body[key].is_number()) return body[key].get<double>();
  return std::stod(fmt::format("{}", used));
}

// Messages: "stop" is the Anthropic stop_sequences.
const FieldNames kMessagesNames = {{"stop", "stop_sequences"}};

class MessagesStream final : public StreamFormat {
 public:
  explicit MessagesStream(std::unique_ptr<MessageWriter> w) : w_(std::move(w)) {}
  std::string begin(const GenerationJob& job) override { return w_->start(job.usage()); }
  std::string update(const GenerationJob& job, const ChoiceUpdate& u) override {
    std::string out = w_->add(u.delta);
    if (!u.finished) return out;
    const ChoiceOutput& c = job.choice(0);
    if (!failure(c).empty()) return out + messages_error_event(failure_error(c));
    return out + w_->finish(*c.finish_reason(), c.stop_reason(), job.usage());
  }
  std::string end(const GenerationJob&) override { return {}; }

 private:
  std::unique_ptr<MessageWriter> w_;
};

class ResponsesStream final : public StreamFormat {
 public:
  explicit ResponsesStream(std::unique_ptr<ResponseWriter> w) : w_(std::move(w)) {}
  std::string begin(const GenerationJob&) override { return w_->start(); }
  std::string update(const GenerationJob& job, const ChoiceUpdate& u) override {
    std::string out = w_->add(u.delta);
    if (!u.finished) return out;
    const ChoiceOutput& c = job.choice(0);
    if (!failure(c).empty()) return out + w_->fail(failure(c));
    return out + w_->finish(*c.finish_reason(), job.usage(), c.reasoning_tokens());
  }
  std::string end(const GenerationJob&) override { return {}; }

 private:
  std::unique_ptr<ResponseWriter> w_;
};

}  // namespace

void handle_messages(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const Json body = parse_json_body(req);
  const LoraChoice lora = check_model(body, ctx.model);
  const ServedModel& m = ctx.model;
  const Json chat = messages_to_chat_body(body, MessagesEndpoint::create);
  const GenerationParams gp = with_client_fields(
      kMessagesNames, [&] { return parse_generation_params(chat, Endpoint::chat, m.defaults, m.engine->vocab_size()); });
  auto job = with_client_fields(kMessagesNames, [&] { return start_chat_job(ctx, chat, gp, {"messages", "max_tokens"}, lora); });
  auto writer = std::make_unique<MessageWriter>(random_id("msg_"), reply_model(lora, m), gp.stream);
  if (gp.stream) return stream_job(ctx, req, res, std::move(job), std::make_unique<MessagesStream>(std::move(writer)));
  run_job(ctx, req, *job, [&](ChoiceUpdate& u) { writer->add(u.delta); });
  const ChoiceOutput& c = job->choice(0);
  if (!failure(c).empty()) throw failure_error(c);
  writer->finish(*c.finish_reason(), c.stop_reason(), job->usage());
  send_json(res, 200, writer->message());
}

void handle_count_tokens(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const Json body = parse_json_body(req);
  check_model(body, ctx.model);
  const Json chat = messages_to_chat_body(body, MessagesEndpoint::count_tokens);
  const ClientWatch client(ctx);
  const ChatPrompt p =
      with_client_fields(kMessagesNames, [&] { return build_chat_prompt(chat, ctx.model, client.fetch_stop()); });
  send_json(res, 200, Json{{"input_tokens", p.ids.size()}});
}

void handle_responses(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const Json body = parse_json_body(req);
  const LoraChoice lora = check_model(body, ctx.model);
  const ServedModel& m = ctx.model;
  const ResponsesRequest r = parse_responses_request(body);
  static const FieldNames kNames = {{"messages", "input"},
                                    {"max_tokens", "max_output_tokens"},
                                    {"response_format.json_schema.schema", "text.format.schema"},
                                    {"response_format.json_schema", "text.format"},
                                    {"response_format", "text.format"}};
  const GenerationParams gp = with_client_fields(
      kNames, [&] { return parse_generation_params(r.chat_body, Endpoint::chat, m.defaults, m.engine->vocab_size()); });
  auto job = with_client_fields(kNames, [&] { return start_chat_job(ctx, r.chat_body, gp, {"input", "max_output_tokens"}, lora); });
  auto writer = std::make_unique<ResponseWriter>(
      random_id("resp_"), static_cast<int64_t>(std::time(nullptr)), reply_model(lora, m), r.settings,
      echoed(body, "temperature", gp.sampling.temperature), echoed(body, "top_p", gp.sampling.top_p), gp.stream);
  if (gp.stream) return stream_job(ctx, req, res, std::move(job), std::make_unique<ResponsesStream>(std::move(writer)));
  run_job(ctx, req, *job, [&](ChoiceUpdate& u) { writer->add(u.delta); });
  const ChoiceOutput& c = job->choice(0);
  if (!failure(c).empty()) throw failure_error(c);
  writer->finish(*c.finish_reason(), job->usage(), c.reasoning_tokens());
  send_json(res, 200, writer->response());
}

}  // namespace ds::server
