#include "server/start_job.h"

#include <algorithm>

#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/client_watch.h"
#include "server/structured_output.h"
#include "server/tool_call_grammar.h"

namespace ds::server {

namespace {

void check_context(const ServedModel& m, const GenerationParams& gp, int64_t prompt_tokens, const RequestFields& f) {
  const int64_t max_ctx = m.engine->max_ctx();
  const std::string limit = "this model's maximum context length is " + std::to_string(max_ctx) + " tokens";
  if (prompt_tokens >= max_ctx)
    throw context_too_long(limit + "; the prompt has " + std::to_string(prompt_tokens) +
                               " tokens, which leaves no room for a reply",
                           f.prompt);
  // Compared without adding, and the sum printed unsigned: a max_tokens near 2^63 would
  // overflow it.
  if (gp.max_tokens && *gp.max_tokens > max_ctx - prompt_tokens) {
    const uint64_t total = static_cast<uint64_t>(prompt_tokens) + static_cast<uint64_t>(*gp.max_tokens);
    throw context_too_long(limit + "; you requested " + std::to_string(total) + " tokens (" +
                               std::to_string(prompt_tokens) + " in the prompt, " + std::to_string(*gp.max_tokens) +
                               " for the reply): lower " + f.max_tokens + " or shorten the prompt",
                           f.max_tokens);
  }
}

GrammarCache& grammars_of(const ServedModel& m, const std::string& param) {
  if (!m.grammars) throw unsupported_field(param, "structured outputs are not available for this model");
  return *m.grammars;
}

// The constraint applies after </think>: the engine switches it on at that token when the
// prompt opened reasoning; when the prompt leaves reasoning to the model, the grammar itself
// allows an optional <think> block first.
OutputGrammar chat_grammar(const RouteContext& ctx, const Json& body, const ChatPrompt& cp) {
  const ServedModel& m = ctx.model;
  const OutputConstraint oc = parse_output_constraint(body);
  OutputGrammar out;
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
    // Runs on a compile worker, possibly after this request is gone: owns its inputs.
    auto build = [tools = cp.tools, function = cp.forced_function, parallel,
                  optional_reasoning](const grammar::CompileBudget& budget) {
      grammar::Grammar g = tool_call_grammar(tools, function, parallel, &budget);
      return optional_reasoning ? with_optional_reasoning(std::move(g)) : g;
    };
    const ClientWatch client(ctx);
    out.grammar = cached_grammar(cache, key, build, client.gone(), "'tools' cannot be forced by tool_choice: ", "tools");
  } else if (oc.kind != OutputConstraint::Kind::none) {
    const ClientWatch client(ctx);
    out.grammar = compile_output_constraint(oc, grammars_of(m, oc.param), optional_reasoning, client.gone());
  }
  if (out.grammar && think_end && cp.reasoning == PromptReasoning::opened) out.after = *think_end;
  return out;
}

}  // namespace

OutputGrammar completion_grammar(const RouteContext& ctx, const Json& body) {
  const OutputConstraint oc = parse_output_constraint(body);
  OutputGrammar out;
  if (oc.kind == OutputConstraint::Kind::none) return out;
  const ClientWatch client(ctx);
  out.grammar = compile_output_constraint(oc, grammars_of(ctx.model, oc.param), false, client.gone());
  return out;
}

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
                                     const RequestFields& fields, const std::vector<int64_t>& cache_points,
                                     const OutputGrammar& grammar, const LoraChoice& lora) {
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
      // Where the caller names no point (a /v1/completions prompt), the prompt's end: the same
      // prompt sent again (or the n choices of this one, whichever engine step each arrives
      // in) starts from its cached state; without it the prompt would be snapshotted at its
      // branch point on the second send and hit only on the third. A chat prompt names its
      // generation prompt's start (chat_request.cpp), a few tokens earlier, which serves a
      // re-send as well; a snapshot at the end besides would supersede that one
      // (PrefixCache::add_snapshot sends a chain's earlier snapshot to the front of the
      // eviction order) while the next turn shares the prompt only up to it.
      if (r.cache_points.empty()) r.cache_points.push_back(static_cast<int64_t>(r.prompt_size()) - 1);
      r.grammar = grammar.grammar;
      r.grammar_after = grammar.after;
      r.thinking = opts.thinking;
      r.lora = lora.adapter;
      r.lora_id = lora.id;
      // Choice i of a seeded request uses seed + i: reproducible, and the n choices differ.
      if (gp.sampling.seed) r.sampling.seed = *gp.sampling.seed + static_cast<uint64_t>(i);
      specs.push_back(ChoiceSpec{std::move(r), opts, static_cast<int>(pi)});
    }
  }
  return specs;
}

std::unique_ptr<GenerationJob> start_chat_job(const RouteContext& ctx, const Json& chat_body,
                                              const GenerationParams& gp, const RequestFields& fields,
                                              const LoraChoice& lora) {
  const ServedModel& m = ctx.model;
  ChatPrompt cp = [&] {
    const ClientWatch client(ctx);
    return build_chat_prompt(chat_body, m, client.fetch_stop());
  }();
  const OutputGrammar grammar = chat_grammar(ctx, chat_body, cp);
  ChoiceOptions opts = choice_options(m, gp);
  // With thinking off the prompt closed the reasoning block: nothing in the reply is
  // reasoning, not even a "<think>" that structured output writes inside a JSON string.
  opts.split_reasoning = cp.reasoning != PromptReasoning::closed;
  opts.reports_reasoning = true;
  opts.reasoning_at_start_only = grammar.grammar != nullptr;
  opts.start_in_reasoning = cp.opens_reasoning;
  opts.parse_tool_calls = cp.parse_tool_calls;
  opts.tools = cp.tools;
  opts.thinking = thinking_spec(cp.thinking, m.thinking, cp.reasoning == PromptReasoning::opened,
                                cp.reasoning == PromptReasoning::closed, opts.reasoning_at_start_only);
  const std::vector<PromptIds> prompts = {std::make_shared<const std::vector<int32_t>>(std::move(cp.ids))};
  std::vector<ChoiceSpec> specs = choice_specs(m, gp, prompts, opts, fields, cp.cache_points, grammar, lora);
  for (ChoiceSpec& s : specs) s.request.multimodal = cp.multimodal;  // n choices: one image, encoded once
  return std::make_unique<GenerationJob>(*m.engine, *m.tokenizer, ctx.metrics, std::move(specs), fields.prompt);
}

}  // namespace ds::server
