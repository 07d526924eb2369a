// POST /v1/chat/completions and POST /v1/completions: validate, build the prompt(s), submit
// n choices per prompt, then answer with one JSON body or an SSE stream (chunks per choice,
// an optional usage chunk with empty choices, then "data: [DONE]").
#include <chrono>
#include <ctime>
#include <memory>

#include <spdlog/spdlog.h>

#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/generation_job.h"
#include "server/openai_format.h"
#include "server/random_id.h"
#include "server/request_params.h"
#include "server/routes.h"
#include "server/structured_output.h"
#include "server/tool_call_grammar.h"

namespace ds::server {

namespace {

using Ids = std::shared_ptr<const std::vector<int32_t>>;

struct Shape {
  bool chat = true;
  ResponseHeader header;
  bool logprobs = false;
  bool include_usage = false;
  bool continuous_usage = false;
  bool return_token_ids = false;
};

// As OpenAI and vLLM: a prompt that leaves no room for one reply token, or a max_tokens that
// cannot fit beside the prompt, is a 400 naming both numbers (never a silent clamp).
void check_context(const ServedModel& m, const GenerationParams& gp, int64_t prompt_tokens, const char* prompt_param) {
  const int64_t max_ctx = m.engine->max_ctx();
  const std::string limit = "this model's maximum context length is " + std::to_string(max_ctx) + " tokens";
  if (prompt_tokens >= max_ctx)
    throw context_too_long(limit + "; the prompt has " + std::to_string(prompt_tokens) +
                               " tokens, which leaves no room for a reply",
                           prompt_param);
  if (gp.max_tokens && prompt_tokens + *gp.max_tokens > max_ctx)
    throw context_too_long(limit + "; you requested " + std::to_string(prompt_tokens + *gp.max_tokens) + " tokens (" +
                               std::to_string(prompt_tokens) + " in the prompt, " + std::to_string(*gp.max_tokens) +
                               " for the reply): lower max_tokens or shorten the prompt",
                           "max_tokens");
}

// The structured-output grammar every choice samples under (null: none), and the token after
// which it applies (-1: from the first token).
struct Constraint {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  int32_t after = -1;
};

GrammarCache& grammars_of(const ServedModel& m, const std::string& param) {
  if (!m.grammars) throw unsupported_field(param, "structured outputs are not available for this model");
  return *m.grammars;
}

std::vector<ChoiceSpec> make_specs(const ServedModel& m, const GenerationParams& gp, const std::vector<Ids>& prompts,
                                   const ChoiceOptions& opts, const char* prompt_param,
                                   const std::vector<int64_t>& cache_points = {}, const Constraint& constraint = {}) {
  std::vector<ChoiceSpec> specs;
  const int64_t max_ctx = m.engine->max_ctx();
  for (const Ids& p : prompts) check_context(m, gp, static_cast<int64_t>(p->size()), prompt_param);
  for (size_t pi = 0; pi < prompts.size(); ++pi) {
    for (int i = 0; i < gp.n; ++i) {
      scheduler::Request r;
      r.prompt = prompts[pi];
      // Without max_tokens a reply may run to the context limit.
      r.max_tokens = gp.max_tokens ? *gp.max_tokens : max_ctx - static_cast<int64_t>(r.prompt_size());
      r.stop_token_ids = gp.stop_token_ids;
      r.ignore_eos = gp.ignore_eos;
      r.sampling = gp.sampling;
      r.cache_points = cache_points;
      // The n choices of a prompt share it: snapshot its end once, whichever engine step each
      // choice arrives in.
      if (gp.n > 1) r.cache_points.push_back(static_cast<int64_t>(r.prompt_size()) - 1);
      r.grammar = constraint.grammar;
      r.grammar_after = constraint.after;
      // Choice i of a seeded request uses seed + i: reproducible, and the n choices differ.
      if (gp.sampling.seed) r.sampling.seed = *gp.sampling.seed + static_cast<uint64_t>(i);
      specs.push_back(ChoiceSpec{std::move(r), opts, static_cast<int>(pi)});
    }
  }
  return specs;
}

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

void run_to_completion(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res,
                       GenerationJob& job, const Shape& shape) {
  ConnectionWatch watch(ctx.watcher, req, ctx.model.engine, job.ids());
  auto registration = ctx.active.add(ctx.model.engine, job.ids());
  std::vector<ChoiceDelta> acc(job.size());
  while (!job.done())
    for (auto& u : job.next(std::chrono::milliseconds(1000))) acc[static_cast<size_t>(u.index)].append(std::move(u.delta));

  std::vector<FinishedChoice> choices;
  for (size_t i = 0; i < job.size(); ++i) {
    const ChoiceOutput& c = job.choice(i);
    if (*c.finish_reason() == "error") throw internal_error("generation failed: " + c.error());
    choices.push_back(FinishedChoice{static_cast<int>(i), std::move(acc[i]), *c.finish_reason(), c.stop_reason(),
                                     shape.return_token_ids ? Json(c.token_ids()) : Json(nullptr)});
  }
  const auto& tok = *ctx.model.tokenizer;
  send_json(res, 200,
            shape.chat ? chat_completion_json(shape.header, tok, choices, shape.logprobs, job.usage())
                       : text_completion_json(shape.header, tok, choices, shape.logprobs, job.usage()));
}

// Everything a streaming reply needs after the handler has returned (the transport calls the
// response's stream afterwards, on the same thread, and releases it after the last write).
struct StreamState {
  RouteContext ctx;
  Shape shape;
  std::unique_ptr<GenerationJob> job;
  std::unique_ptr<ConnectionWatch> watch;
  ActiveJobs::Registration registration;
  bool started = false;

  StreamState(const RouteContext& c, Shape s, std::unique_ptr<GenerationJob> j)
      : ctx(c), shape(std::move(s)), job(std::move(j)) {}

  Json with_usage(Json chunk) const {
    if (shape.continuous_usage)
      chunk["usage"] = usage_json(job->usage());
    else if (shape.include_usage)
      chunk["usage"] = nullptr;
    return chunk;
  }

  Json chunk(int index, const ChoiceDelta& d, bool role, const std::optional<std::string>& finish,
             const Json& stop_reason) const {
    const auto& tok = *ctx.model.tokenizer;
    return with_usage(shape.chat ? chat_chunk_json(shape.header, tok, index, d, role, shape.logprobs, finish, stop_reason)
                                 : text_chunk_json(shape.header, tok, index, d, shape.logprobs, finish, stop_reason));
  }

  // Writes the whole stream; false when the client went away (the job is cancelled).
  bool pump(const BodyWriter& write) {
    auto gone = [&] {
      job->cancel();
      return false;
    };
    if (!started) {
      started = true;
      if (shape.chat)
        for (size_t i = 0; i < job->size(); ++i)
          if (!write(sse_event(chunk(static_cast<int>(i), ChoiceDelta{}, true, std::nullopt, nullptr)))) return gone();
    }
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
      for (auto& u : updates) {
        if (!u.delta.empty() && !write(sse_event(chunk(u.index, u.delta, false, std::nullopt, nullptr)))) return gone();
        if (!u.finished) continue;
        const ChoiceOutput& c = job->choice(static_cast<size_t>(u.index));
        if (*c.finish_reason() == "error" &&
            !write(sse_event(internal_error("generation failed: " + c.error()).body())))
          return gone();
        if (!write(sse_event(chunk(u.index, ChoiceDelta{}, false, c.finish_reason(), c.stop_reason())))) return gone();
      }
      last_write = now;
    }
    if (shape.include_usage &&
        !write(sse_event(usage_chunk_json(shape.header, shape.chat, job->usage()))))
      return gone();
    if (!write(kSseDone)) return gone();
    return true;
  }
};

void respond(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res,
             std::unique_ptr<GenerationJob> job, Shape shape, bool stream) {
  if (!stream) {
    run_to_completion(ctx, req, res, *job, shape);
    return;
  }
  auto st = std::make_shared<StreamState>(ctx, std::move(shape), std::move(job));
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

ChoiceOptions base_options(const ServedModel& m, const GenerationParams& gp) {
  ChoiceOptions o;
  o.skip_special = gp.skip_special;
  o.stop = gp.stop;
  o.include_stop = gp.include_stop;
  o.logprobs = gp.sampling.logprobs;
  o.eos_ids = m.eos_ids;
  return o;
}

// The `prompt` of /v1/completions: a string, a list of token ids, or a list of either.
std::vector<Ids> completion_prompts(const Json& body, const ServedModel& m) {
  if (!body.contains("prompt") || body["prompt"].is_null()) throw bad_request("'prompt' is required", "prompt");
  const Json& p = body["prompt"];
  auto encode = [&](const Json& v) -> Ids {
    return std::make_shared<const std::vector<int32_t>>(m.tokenizer->encode(v.get<std::string>(), true));
  };
  auto ids = [&](const Json& arr) -> Ids {
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
  std::vector<Ids> prompts;
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
  check_model(body, ctx.model);
  const ServedModel& m = ctx.model;
  const GenerationParams gp = parse_generation_params(body, Endpoint::chat, m.defaults, m.engine->vocab_size());
  ChatPrompt cp = build_chat_prompt(body, m);
  const OutputConstraint oc = parse_output_constraint(body);
  Constraint constraint;
  // The constraint applies after </think>: the engine switches it on at that token when the
  // prompt opened reasoning; when the prompt leaves reasoning to the model, the grammar
  // itself allows an optional <think> block first.
  const std::optional<int32_t> think_end = m.tokenizer->token_id("</think>");
  const bool optional_reasoning = think_end && cp.reasoning == PromptReasoning::up_to_model;
  if (cp.force_tool_call) {
    if (oc.kind != OutputConstraint::Kind::none)
      throw bad_request("'" + oc.param + "' cannot be combined with a tool_choice that forces a call", oc.param);
    GrammarCache& cache = grammars_of(m, "tool_choice");
    // A named function is called once; "required" may call several when parallel calls are on.
    const bool parallel = cp.forced_function.empty() && cp.parallel_tool_calls;
    const std::string key = std::string(optional_reasoning ? "tools r\n" : "tools\n") + cp.forced_function +
                            (parallel ? "\n1\n" : "\n0\n") + dump_json(cp.tools);
    try {
      constraint.grammar = cache.get(key, [&] {
        grammar::Grammar g = tool_call_grammar(cp.tools, cp.forced_function, parallel);
        return optional_reasoning ? with_optional_reasoning(std::move(g)) : g;
      });
    } catch (const grammar::GrammarError& e) {
      throw bad_request(std::string("'tools' cannot be forced by tool_choice: ") + e.what(), "tools");
    }
  } else if (oc.kind != OutputConstraint::Kind::none) {
    constraint.grammar = compile_output_constraint(oc, grammars_of(m, oc.param), optional_reasoning);
  }
  if (constraint.grammar && think_end && cp.reasoning == PromptReasoning::opened) constraint.after = *think_end;

  ChoiceOptions opts = base_options(m, gp);
  opts.split_reasoning = true;
  opts.start_in_reasoning = cp.opens_reasoning;
  opts.parse_tool_calls = cp.parse_tool_calls;
  opts.tools = cp.tools;
  const std::vector<Ids> prompts = {std::make_shared<const std::vector<int32_t>>(std::move(cp.ids))};
  auto job = std::make_unique<GenerationJob>(*m.engine, *m.tokenizer, ctx.metrics, make_specs(m, gp, prompts, opts, "messages", cp.cache_points, constraint),
                                             "messages");
  respond(ctx, req, res, std::move(job), make_shape(m, gp, true), gp.stream);
}

void handle_completions(const RouteContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const Json body = parse_json_body(req);
  check_model(body, ctx.model);
  const ServedModel& m = ctx.model;
  if (get_bool(body, "echo").value_or(false)) throw unsupported_field("echo");
  if (auto suffix = get_string(body, "suffix"); suffix && !suffix->empty()) throw unsupported_field("suffix");
  const GenerationParams gp = parse_generation_params(body, Endpoint::completions, m.defaults, m.engine->vocab_size());
  const std::vector<Ids> prompts = completion_prompts(body, m);
  const OutputConstraint oc = parse_output_constraint(body);
  Constraint constraint;
  if (oc.kind != OutputConstraint::Kind::none) constraint.grammar = compile_output_constraint(oc, grammars_of(m, oc.param));
  auto job = std::make_unique<GenerationJob>(*m.engine, *m.tokenizer, ctx.metrics,
                                             make_specs(m, gp, prompts, base_options(m, gp), "prompt", {}, constraint),
                                             "prompt");
  respond(ctx, req, res, std::move(job), make_shape(m, gp, false), gp.stream);
}

}  // namespace ds::server
