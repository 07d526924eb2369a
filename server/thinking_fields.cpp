// The request-facing half of thinking_setup.h: the budget fields, the effort and serve's
// effort table. Apart from the model-facing half (thinking_setup.cpp) so that the request
// fuzz target links without a tokenizer or a template engine.
#include "server/thinking_setup.h"

#include <stdexcept>

#include "server/api_error.h"
#include "server/request_params.h"

namespace ds::server {

namespace {

constexpr const char* kEfforts[] = {"low", "medium", "high", "xhigh"};

bool known_effort(const std::string& e) {
  for (const char* k : kEfforts)
    if (e == k) return true;
  return false;
}

}  // namespace

std::map<std::string, int64_t> parse_effort_budgets(const std::string& text) {
  std::map<std::string, int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) {
      if (comma == text.size()) break;
      throw std::invalid_argument("an empty item in '" + text + "'");
    }
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("'" + item + "' is not EFFORT=TOKENS");
    const std::string effort = item.substr(0, eq), value = item.substr(eq + 1);
    if (!known_effort(effort)) throw std::invalid_argument("unknown effort '" + effort + "' (low, medium, high, xhigh)");
    size_t used = 0;
    long long n = -1;
    try {
      n = std::stoll(value, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != value.size() || n < 0 || n > kMaxThinkingBudget)
      throw std::invalid_argument("'" + item + "': the budget must be a token count >= 0");
    if (!out.emplace(effort, n).second) throw std::invalid_argument("effort '" + effort + "' given twice");
  }
  return out;
}

ThinkingFields parse_thinking_fields(const Json& body) {
  ThinkingFields f;
  for (const char* k : {"thinking_token_budget", "thinking_budget"}) {
    const auto v = get_int(body, k);
    if (!v) continue;
    if (*v < 0 || *v > kMaxThinkingBudget)
      throw bad_request(std::string("'") + k + "' must be a token count >= 0", k);
    if (f.budget && *f.budget != *v)
      throw bad_request("'thinking_token_budget' and 'thinking_budget' differ; give one", "thinking_budget");
    f.budget = *v;
  }
  if (auto e = get_string(body, "reasoning_effort")) {
    if (*e != "none" && *e != "minimal" && !known_effort(*e))
      throw bad_request("'reasoning_effort' must be none, minimal, low, medium, high or xhigh", "reasoning_effort");
    f.effort = *e;
  }
  return f;
}

void apply_effort_to_kwargs(const ThinkingFields& f, const ThinkingSetup& setup, Json& kwargs) {
  if (!f.effort) return;
  if ((*f.effort == "none" || *f.effort == "minimal") && !kwargs.contains("enable_thinking"))
    kwargs["enable_thinking"] = false;
  if (setup.template_takes_effort && !kwargs.contains("reasoning_effort")) kwargs["reasoning_effort"] = *f.effort;
}

std::shared_ptr<const scheduler::ThinkingSpec> thinking_spec(const ThinkingFields& f, const ThinkingSetup& setup,
                                                            bool starts_inside, bool closed, bool constrained) {
  std::optional<int64_t> budget = f.budget;
  if (!budget && f.effort) {
    const auto it = setup.effort_budgets.find(*f.effort);
    if (it != setup.effort_budgets.end()) budget = it->second;
  }
  if (!budget) budget = setup.default_budget;
  if (!setup.available()) {
    if (f.budget)
      throw unsupported_field("thinking_token_budget", "this model's tokenizer has no <think> and </think> tokens to budget");
    return nullptr;
  }
  auto s = std::make_shared<scheduler::ThinkingSpec>();
  // With thinking off nothing in the reply is reasoning (a "<think>" it writes is text, as
  // the splitter reads it: reasoning_splitter.h), so no token opens a block.
  s->open_token = closed ? -1 : *setup.open_token;
  s->close_token = *setup.close_token;
  s->close_sequence = setup.close_sequence;
  s->starts_inside = starts_inside && !closed;
  s->opens_at_start_only = constrained;
  // A prompt that closed the block leaves nothing to budget (the reply is the answer).
  s->budget = closed ? -1 : budget.value_or(-1);
  return s;
}

}  // namespace ds::server
