#include "server/start_job.h"

#include "server/api_error.h"
#include "server/chat_request.h"

namespace ds::server {

namespace {

void check_context(const ServedModel& m, const GenerationParams& gp, int64_t prompt_tokens, const RequestFields& f) {
  const int64_t max_ctx = m.engine->max_ctx();
  const std::string limit = "this model's maximum context length is " + std::to_string(max_ctx) + " tokens";
  if (prompt_tokens >= max_ctx)
    throw context_too_long(limit + "; the prompt has " + std::to_string(prompt_tokens) +
                               " tokens, which leaves no room for a reply",
                           f.prompt);
  if (gp.max_tokens && prompt_tokens + *gp.max_tokens > max_ctx)
    throw context_too_long(limit + "; you requested " + std::to_string(prompt_tokens + *gp.max_tokens) + " tokens (" +
                               std::to_string(prompt_tokens) + " in the prompt, " + std::to_string(*gp.max_tokens) +
                               " for the reply): lower " + f.max_tokens + " or shorten the prompt",
                           f.max_tokens);
}

}  // namespace

ChoiceOptions choice_options(const ServedModel& m, const GenerationParams& gp) {
  ChoiceOptions o;
  o.skip_special = gp.skip_special;
  o.stop = gp.stop;
  o.include_stop = gp.include_stop;
  o.logprobs = gp.sampling.logprobs;
  o.eos_ids = m.eos_ids;
  return o;
}

std::vector<ChoiceSpec> choice_specs(const ServedModel& m, const GenerationParams& gp,
                                     const std::vector<PromptIds>& prompts, const ChoiceOptions& opts,
                                     const RequestFields& fields, const std::vector<int64_t>& cache_points) {
  std::vector<ChoiceSpec> specs;
  const int64_t max_ctx = m.engine->max_ctx();
  for (const PromptIds& p : prompts) check_context(m, gp, static_cast<int64_t>(p->size()), fields);
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
      // Choice i of a seeded request uses seed + i: reproducible, and the n choices differ.
      if (gp.sampling.seed) r.sampling.seed = *gp.sampling.seed + static_cast<uint64_t>(i);
      specs.push_back(ChoiceSpec{std::move(r), opts, static_cast<int>(pi)});
    }
  }
  return specs;
}

std::unique_ptr<GenerationJob> start_chat_job(const RouteContext& ctx, const Json& chat_body,
                                              const GenerationParams& gp, const RequestFields& fields) {
  const ServedModel& m = ctx.model;
  ChatPrompt cp = build_chat_prompt(chat_body, m);
  ChoiceOptions opts = choice_options(m, gp);
  opts.split_reasoning = true;
  opts.start_in_reasoning = cp.opens_reasoning;
  opts.parse_tool_calls = cp.parse_tool_calls;
  opts.tools = cp.tools;
  const std::vector<PromptIds> prompts = {std::make_shared<const std::vector<int32_t>>(std::move(cp.ids))};
  return std::make_unique<GenerationJob>(*m.engine, *m.tokenizer, ctx.metrics,
                                         choice_specs(m, gp, prompts, opts, fields, cp.cache_points), fields.prompt);
}

}  // namespace ds::server
