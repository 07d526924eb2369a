// The model-facing half of thinking_setup.h: what the tokenizer and the chat template say about
// reasoning blocks (the request fields are in thinking_fields.cpp).
#include "server/thinking_setup.h"

#include <spdlog/spdlog.h>

namespace ds::server {

namespace {

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

}  // namespace ds::server
