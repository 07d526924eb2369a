// POST /v1/chat/completions and POST /v1/completions: validate, build the prompt(s), submit
// n choices per prompt, then answer with one JSON body or an SSE stream (chunks per choice,
// an optional usage chunk with empty choices, then "data: [DONE]").
#include <ctime>
#include <memory>

#include "server/api_error.h"
#include "server/job_reply.h"
#include "server/openai_format.h"
#include "server/random_id.h"
#include "server/request_params.h"
#include "server/routes.h"
#include "server/start_job.h"

namespace ds::server {

namespace {

struct Shape {
  bool chat = true;
  ResponseHeader header;
  bool logprobs = false;
  bool include_usage = false;
  bool continuous_usage = false;
  bool return_token_ids = false;
};

void run_to_completion(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res,
                       GenerationJob& job, const Shape& shape) {
  std::vector<ChoiceDelta> acc(job.size());
  run_job(ctx, req, job, [&](ChoiceUpdate& u) { acc[static_cast<size_t>(u.index)].append(std::move(u.delta)); });

  std::vector<FinishedChoice> choices;
  for (size_t i = 0; i < job.size(); ++i) {
    const ChoiceOutput& c = job.choice(i);
    choices.push_back(FinishedChoice{static_cast<int>(i), std::move(acc[i]), *c.finish_reason(), c.stop_reason(),
                                     shape.return_token_ids ? Json(c.token_ids()) : Json(nullptr)});
  }
  const auto& tok = *ctx.model.tokenizer;
  send_json(res, 200,
            shape.chat ? chat_completion_json(shape.header, tok, choices, shape.logprobs, job.usage())
                       : text_completion_json(shape.header, tok, choices, shape.logprobs, job.usage()));
}

// The OpenAI stream: chunks per choice (chat: a first chunk with the role), an optional usage
// chunk with empty choices, then "data: [DONE]".
class OpenAiStream final : public StreamFormat {
 public:
  OpenAiStream(const tok::Tokenizer& tokenizer, Shape shape) : tok_(tokenizer), shape_(std::move(shape)) {}

  std::string begin(const GenerationJob& job) override {
    std::string out;
    if (shape_.chat)
      for (size_t i = 0; i < job.size(); ++i)
        out += sse_event(chunk(job, static_cast<int>(i), ChoiceDelta{}, true, std::nullopt, nullptr));
    return out;
  }

  std::string update(const GenerationJob& job, const ChoiceUpdate& u) override {
    std::string out;
    if (!u.delta.empty()) out += sse_event(chunk(job, u.index, u.delta, false, std::nullopt, nullptr));
    if (!u.finished) return out;
    const ChoiceOutput& c = job.choice(static_cast<size_t>(u.index));
    if (*c.finish_reason() == "error") out += sse_event(internal_error("generation failed: " + c.error()).body());
    return out + sse_event(chunk(job, u.index, ChoiceDelta{}, false, c.finish_reason(), c.stop_reason()));
  }

  std::string end(const GenerationJob& job) override {
    std::string out;
    if (shape_.include_usage) out += sse_event(usage_chunk_json(shape_.header, shape_.chat, job.usage()));
    return out + kSseDone;
  }

 private:
  Json chunk(const GenerationJob& job, int index, const ChoiceDelta& d, bool role,
             const std::optional<std::string>& finish, const Json& stop_reason) const {
    Json c = shape_.chat ? chat_chunk_json(shape_.header, tok_, index, d, role, shape_.logprobs, finish, stop_reason)
                         : text_chunk_json(shape_.header, tok_, index, d, shape_.logprobs, finish, stop_reason);
    if (shape_.continuous_usage)
      c["usage"] = usage_json(job.usage());
    else if (shape_.include_usage)
      c["usage"] = nullptr;
    return c;
  }

  const tok::Tokenizer& tok_;
  Shape shape_;
};

void respond(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res,
             std::unique_ptr<GenerationJob> job, Shape shape, bool stream) {
  if (!stream) {
    run_to_completion(ctx, req, res, *job, shape);
    return;
  }
  stream_job(ctx, req, res, std::move(job), std::make_unique<OpenAiStream>(*ctx.model.tokenizer, std::move(shape)));
}

Shape make_shape(const ServedModel& m, const GenerationParams& gp, bool chat) {
  Shape s;
  s.chat = chat;
  s.header.id = random_id(chat ? "chatcmpl-" : "cmpl-");
  s.header.created = static_cast<int64_t>(std::time(nullptr));
  s.header.model = m.name;
  s.logprobs = gp.sampling.logprobs;
  s.include_usage = gp.include_usage || gp.continuous_usage;
  s.continuous_usage = gp.continuous_usage;
  s.return_token_ids = gp.return_token_ids;
  return s;
}

// The `prompt` of /v1/completions: a string, a list of token ids, or a list of either.
std::vector<PromptIds> completion_prompts(const Json& body, const ServedModel& m) {
  if (!body.contains("prompt") || body["prompt"].is_null()) throw bad_request("'prompt' is required", "prompt");
  const Json& p = body["prompt"];
  auto encode = [&](const Json& v) -> PromptIds {
    return std::make_shared<const std::vector<int32_t>>(m.tokenizer->encode(v.get<std::string>(), true));
  };
  auto ids = [&](const Json& arr) -> PromptIds {
    std::vector<int32_t> out;
    for (const auto& t : arr) {
      if (!t.is_number_integer()) throw bad_request("'prompt' token lists must hold integers", "prompt");
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= m.engine->vocab_size())
        throw bad_request("'prompt' token id " + std::to_string(id) + " is outside the vocabulary", "prompt");
      out.push_back(static_cast<int32_t>(id));
    }
    return std::make_shared<const std::vector<int32_t>>(std::move(out));
  };
  std::vector<PromptIds> prompts;
  if (p.is_string()) {
    prompts.push_back(encode(p));
  } else if (p.is_array() && !p.empty() && p[0].is_number()) {
    prompts.push_back(ids(p));
  } else if (p.is_array() && !p.empty()) {
    for (const auto& e : p) {
      if (e.is_string())
        prompts.push_back(encode(e));
      else if (e.is_array())
        prompts.push_back(ids(e));
      else
        throw bad_request("'prompt' must be a string, a list of token ids, or a list of those", "prompt");
    }
  } else {
    throw bad_request("'prompt' must be a non-empty string, a list of token ids, or a list of those", "prompt");
  }
  if (prompts.size() > static_cast<size_t>(kMaxChoices))
    throw bad_request("'prompt' holds at most " + std::to_string(kMaxChoices) + " prompts", "prompt");
  for (const auto& x : prompts)
    if (x->empty()) throw bad_request("'prompt' must not be empty", "prompt");
  return prompts;
}

}  // namespace

void handle_chat_completions(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const Json body = parse_json_body(req);
  const LoraChoice lora = check_model(body, ctx.model);
  const ServedModel& m = ctx.model;
  const GenerationParams gp = parse_generation_params(body, Endpoint::chat, m.defaults, m.engine->vocab_size());
  Shape shape = make_shape(m, gp, true);
  shape.header.model = reply_model(lora, m);
  respond(ctx, req, res, start_chat_job(ctx, body, gp, {}, lora), std::move(shape), gp.stream);
}

void handle_completions(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const Json body = parse_json_body(req);
  const LoraChoice lora = check_model(body, ctx.model);
  const ServedModel& m = ctx.model;
  if (get_bool(body, "echo").value_or(false)) throw unsupported_field("echo");
  if (auto suffix = get_string(body, "suffix"); suffix && !suffix->empty()) throw unsupported_field("suffix");
  const GenerationParams gp = parse_generation_params(body, Endpoint::completions, m.defaults, m.engine->vocab_size());
  const std::vector<PromptIds> prompts = completion_prompts(body, m);
  const RequestFields fields{"prompt", "max_tokens"};
  const OutputGrammar grammar = completion_grammar(ctx, body);
  auto job = std::make_unique<GenerationJob>(*m.engine, *m.tokenizer, ctx.metrics,
                                             choice_specs(m, gp, prompts, choice_options(m, gp), fields, {}, grammar, lora),
                                             fields.prompt);
  Shape shape = make_shape(m, gp, false);
  shape.header.model = reply_model(lora, m);
  respond(ctx, req, res, std::move(job), std::move(shape), gp.stream);
}

}  // namespace ds::server
