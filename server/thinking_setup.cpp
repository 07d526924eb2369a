#include "server/thinking_setup.h"

#include <stdexcept>

#include <spdlog/spdlog.h>

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

// What the template writes between "</think>" and the answer of an assistant turn that has
// reasoning; empty when it cannot tell (no such turn rendered, or not only whitespace).
std::string close_tail(const chat::ChatTemplate& tmpl) {
  const std::string reasoning = "R7q", answer = "A7q";
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "user"}, {"content", "u"}});
  messages.push_back({{"role", "assistant"}, {"content", answer}, {"reasoning_content", reasoning}});
  std::string text;
  try {
    text = tmpl.render(messages, nlohmann::ordered_json::object(), false);
  } catch (const std::exception& e) {
    spdlog::debug("thinking: the chat template did not render a reasoning turn ({})", e.what());
    return {};
  }
  const size_t r = text.find(reasoning);
  const size_t close = r == std::string::npos ? r : text.find("</think>", r);
  const size_t a = close == std::string::npos ? close : text.find(answer, close);
  if (a == std::string::npos) return {};
  const std::string tail = text.substr(close + 8, a - close - 8);
  return tail.find_first_not_of(" \t\r\n") == std::string::npos ? tail : std::string();
}

}  // namespace

std::string ThinkingSetup::describe() const {
  if (!available()) return "thinking budgets: unavailable (the tokenizer has no <think> / </think> tokens)";
  std::string s = "thinking budgets: the close sequence is " + Json(close_text).dump() + " (" +
                  std::to_string(close_sequence.size()) + " tokens); default budget " +
                  (default_budget ? std::to_string(*default_budget) : std::string("none"));
  std::string efforts;
  for (const auto& [k, v] : effort_budgets) efforts += (efforts.empty() ? "" : ",") + k + "=" + std::to_string(v);
  s += "; reasoning effort budgets " + (efforts.empty() ? std::string("none") : efforts);
  if (template_takes_effort) s += "; the chat template reads reasoning_effort";
  return s;
}

ThinkingSetup make_thinking_setup(const tok::Tokenizer& tokenizer, const chat::ChatTemplate* tmpl,
                                  std::optional<int64_t> default_budget, std::map<std::string, int64_t> effort_budgets) {
  ThinkingSetup s;
  s.default_budget = default_budget;
  s.effort_budgets = std::move(effort_budgets);
  s.open_token = tokenizer.token_id("<think>");
  s.close_token = tokenizer.token_id("</think>");
  if (tmpl) s.template_takes_effort = tmpl->source().find("reasoning_effort") != std::string::npos;
  if (!s.open_token || !s.close_token) return s;
  std::string text = "</think>" + (tmpl ? close_tail(*tmpl) : std::string());
  std::vector<int32_t> ids = tokenizer.encode(text, /*allow_special=*/true);
  if (ids.empty() || ids.front() != *s.close_token) {
    text = "</think>";
    ids = {*s.close_token};
  }
  s.close_sequence = std::move(ids);
  s.close_text = std::move(text);
  return s;
}

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
                                                            bool starts_inside, bool closed) {
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
  s->open_token = *setup.open_token;
  s->close_token = *setup.close_token;
  s->close_sequence = setup.close_sequence;
  s->starts_inside = starts_inside && !closed;
  // A prompt that closed the block leaves nothing to budget (the reply is the answer).
  s->budget = closed ? -1 : budget.value_or(-1);
  return s;
}

}  // namespace ds::server
