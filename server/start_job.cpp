#include "server/start_job.h"

#include "server/api_error.h"
#include "server/chat_request.h"
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
  if (gp.max_tokens && prompt_tokens + *gp.max_tokens > max_ctx)
    throw context_too_long(limit + "; you requested " + std::to_string(prompt_tokens + *gp.max_tokens) + " tokens (" +
                               std::to_string(prompt_tokens) + " in the prompt, " + std::to_string(*gp.max_tokens) +
                               " for the reply): lower " + f.max_tokens + " or shorten the prompt",
                           f.max_tokens);
}

GrammarCache& grammars_of(const ServedModel& m, const std::string& param) {
  if (!m.grammars) throw unsupported_field(param, "structured outputs are not available for this model");
  return *m.grammars;
}

// The constraint applies after </think>: the engine switches it on at that token when the
// prompt opened reasoning; when the prompt leaves reasoning to the model, the grammar itself
// allows an optional <think> block first.
OutputGrammar chat_grammar(const ServedModel& m, const Json& body, const ChatPrompt& cp) {
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
    try {
      out.grammar = cache.get(key, [&] {
        grammar::Grammar g = tool_call_grammar(cp.tools, cp.forced_function, parallel);
        return optional_reasoning ? with_optional_reasoning(std::move(g)) : g;
      });
    } catch (const grammar::GrammarError& e) {
      throw bad_request(std::string("'tools' cannot be forced by tool_choice: ") + e.what(), "tools");
    }
  } else if (oc.kind != OutputConstraint::Kind::none) {
    out.grammar = compile_output_constraint(oc, grammars_of(m, oc.param), optional_reasoning);
  }
  if (out.grammar && think_end && cp.reasoning == PromptReasoning::opened) out.after = *think_end;
  return out;
}

}  // namespace

OutputGrammar completion_grammar(const ServedModel& m, const Json& body) {
  const OutputConstraint oc = parse_output_constraint(body);
  OutputGrammar out;
  if (oc.kind != OutputConstraint::Kind::none) out.grammar = compile_output_constraint(oc, grammars_of(m, oc.param));
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
                                     const OutputGrammar& grammar) {
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
      // The n choices of a prompt share it: snapshot its end once, whichever engine step each
      // choice arrives in.
      if (gp.n > 1) r.cache_points.push_back(static_cast<int64_t>(r.prompt_size()) - 1);
      r.grammar = grammar.grammar;
      r.grammar_after = grammar.after;
      r.thinking = opts.thinking;
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
  const OutputGrammar grammar = chat_grammar(m, chat_body, cp);
  ChoiceOptions opts = choice_options(m, gp);
  opts.split_reasoning = true;
  opts.start_in_reasoning = cp.opens_reasoning;
  opts.parse_tool_calls = cp.parse_tool_calls;
  opts.tools = cp.tools;
  opts.thinking = thinking_spec(cp.thinking, m.thinking, cp.reasoning == PromptReasoning::opened,
                                cp.reasoning == PromptReasoning::closed);
  const std::vector<PromptIds> prompts = {std::make_shared<const std::vector<int32_t>>(std::move(cp.ids))};
  return std::make_unique<GenerationJob>(*m.engine, *m.tokenizer, ctx.metrics,
                                         choice_specs(m, gp, prompts, opts, fields, cp.cache_points, grammar),
                                         fields.prompt);
}

}  // namespace ds::server
