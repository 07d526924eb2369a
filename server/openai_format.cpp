#include "server/openai_format.h"

#include <cmath>
#include <map>

namespace ds::server {

namespace {

// JSON has no -inf; OpenAI reports it as -9999.0.
double finite_logprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

std::string token_string(const tok::Tokenizer& t, int32_t id) {
  const int32_t one[1] = {id};
  return t.decode(one, /*skip_special=*/false);
}

Json token_bytes(const tok::Tokenizer& t, int32_t id) {
  Json bytes = Json::array();
  std::string_view b = t.token_bytes(id);
  if (b.empty() && t.is_added(id)) {
    const std::string s = token_string(t, id);
    for (unsigned char c : s) bytes.push_back(static_cast<int>(c));
    return bytes;
  }
  for (unsigned char c : b) bytes.push_back(static_cast<int>(c));
  return bytes;
}

Json reasoning_value(const std::string& r) { return r.empty() ? Json(nullptr) : Json(r); }

}  // namespace

Json usage_json(const Usage& u) {
  Json j = {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  if (u.cached_tokens) j["prompt_tokens_details"] = Json{{"cached_tokens", *u.cached_tokens}};
  if (u.reasoning_tokens) j["completion_tokens_details"] = Json{{"reasoning_tokens", *u.reasoning_tokens}};
  return j;
}

Json chat_logprobs_json(const tok::Tokenizer& t, const std::vector<TokenLogprobInfo>& entries) {
  Json content = Json::array();
  for (const auto& e : entries) {
    Json top = Json::array();
    for (const auto& alt : e.top)
      top.push_back(Json{{"token", token_string(t, alt.token)},
                         {"logprob", finite_logprob(alt.logprob)},
                         {"bytes", token_bytes(t, alt.token)}});
    content.push_back(Json{{"token", token_string(t, e.token)},
                           {"logprob", finite_logprob(e.logprob)},
                           {"bytes", token_bytes(t, e.token)},
                           {"top_logprobs", std::move(top)}});
  }
  return Json{{"content", std::move(content)}};
}

Json completion_logprobs_json(const tok::Tokenizer& t, const std::vector<TokenLogprobInfo>& entries) {
  Json tokens = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
  for (const auto& e : entries) {
    tokens.push_back(token_string(t, e.token));
    lps.push_back(finite_logprob(e.logprob));
    Json top = Json::object();
    for (const auto& alt : e.top) top[token_string(t, alt.token)] = finite_logprob(alt.logprob);
    tops.push_back(std::move(top));
    offsets.push_back(e.text_offset);
  }
  return Json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(lps)},
              {"top_logprobs", std::move(tops)},
              {"text_offset", std::move(offsets)}};
}

Json tool_call_deltas_json(const std::vector<ToolCallDelta>& deltas) {
  Json out = Json::array();
  for (const auto& d : deltas) {
    if (!out.empty() && out.back()["index"] == d.index && !d.opens) {
      auto& args = out.back()["function"]["arguments"];
      args = args.get<std::string>() + d.arguments;
      continue;
    }
    Json call = {{"index", d.index}};
    if (d.opens) {
      call["id"] = d.id;
      call["type"] = "function";
      call["function"] = Json{{"name", d.name}, {"arguments", d.arguments}};
    } else {
      call["function"] = Json{{"arguments", d.arguments}};
    }
    out.push_back(std::move(call));
  }
  return out;
}

Json tool_calls_json(const std::vector<ToolCallDelta>& deltas) {
  std::map<int, Json> calls;
  for (const auto& d : deltas) {
    auto it = calls.find(d.index);
    if (it == calls.end())
      it = calls.emplace(d.index, Json{{"id", ""}, {"type", "function"}, {"function", {{"name", ""}, {"arguments", ""}}}})
               .first;
    Json& c = it->second;
    if (d.opens) {
      c["id"] = d.id;
      c["function"]["name"] = d.name;
    }
    c["function"]["arguments"] = c["function"]["arguments"].get<std::string>() + d.arguments;
  }
  Json out = Json::array();
  for (auto& [i, c] : calls) out.push_back(std::move(c));
  return out;
}

Json chat_completion_json(const ResponseHeader& h, const tok::Tokenizer& t, const std::vector<FinishedChoice>& choices,
                          bool logprobs, const Usage& usage) {
  Json arr = Json::array();
  for (const auto& c : choices) {
    Json msg = {{"role", "assistant"}};
    const bool calls = !c.output.tool_calls.empty();
    msg["content"] = calls && c.output.content.empty() ? Json(nullptr) : Json(c.output.content);
    msg["reasoning_content"] = reasoning_value(c.output.reasoning);
    msg["reasoning"] = reasoning_value(c.output.reasoning);
    if (calls) msg["tool_calls"] = tool_calls_json(c.output.tool_calls);
    Json choice = {{"index", c.index},
                   {"message", std::move(msg)},
                   {"logprobs", logprobs ? chat_logprobs_json(t, c.output.logprobs) : Json(nullptr)},
                   {"finish_reason", c.finish_reason},
                   {"stop_reason", c.stop_reason}};
    if (!c.token_ids.is_null()) choice["token_ids"] = c.token_ids;
    arr.push_back(std::move(choice));
  }
  return Json{{"id", h.id},
              {"object", "chat.completion"},
              {"created", h.created},
              {"model", h.model},
              {"choices", std::move(arr)},
              {"usage", usage_json(usage)}};
}

Json text_completion_json(const ResponseHeader& h, const tok::Tokenizer& t, const std::vector<FinishedChoice>& choices,
                          bool logprobs, const Usage& usage) {
  Json arr = Json::array();
  for (const auto& c : choices) {
    Json choice = {{"index", c.index},
                   {"text", c.output.content},
                   {"logprobs", logprobs ? completion_logprobs_json(t, c.output.logprobs) : Json(nullptr)},
                   {"finish_reason", c.finish_reason},
                   {"stop_reason", c.stop_reason}};
    if (!c.token_ids.is_null()) choice["token_ids"] = c.token_ids;
    arr.push_back(std::move(choice));
  }
  return Json{{"id", h.id},
              {"object", "text_completion"},
              {"created", h.created},
              {"model", h.model},
              {"choices", std::move(arr)},
              {"usage", usage_json(usage)}};
}

Json chat_chunk_json(const ResponseHeader& h, const tok::Tokenizer& t, int index, const ChoiceDelta& d, bool role,
                     bool logprobs, const std::optional<std::string>& finish_reason, const Json& stop_reason) {
  Json delta = Json::object();
  if (role) delta["role"] = "assistant";
  if (role || !d.content.empty()) delta["content"] = d.content;
  if (!d.reasoning.empty()) {
    delta["reasoning_content"] = d.reasoning;
    delta["reasoning"] = d.reasoning;
  }
  if (!d.tool_calls.empty()) delta["tool_calls"] = tool_call_deltas_json(d.tool_calls);
  Json choice = {{"index", index},
                 {"delta", std::move(delta)},
                 {"logprobs", logprobs && !d.logprobs.empty() ? chat_logprobs_json(t, d.logprobs) : Json(nullptr)},
                 {"finish_reason", finish_reason ? Json(*finish_reason) : Json(nullptr)}};
  if (finish_reason) choice["stop_reason"] = stop_reason;
  return Json{{"id", h.id},
              {"object", "chat.completion.chunk"},
              {"created", h.created},
              {"model", h.model},
              {"choices", Json::array({std::move(choice)})}};
}

Json text_chunk_json(const ResponseHeader& h, const tok::Tokenizer& t, int index, const ChoiceDelta& d, bool logprobs,
                     const std::optional<std::string>& finish_reason, const Json& stop_reason) {
  Json choice = {{"index", index},
                 {"text", d.content},
                 {"logprobs", logprobs && !d.logprobs.empty() ? completion_logprobs_json(t, d.logprobs) : Json(nullptr)},
                 {"finish_reason", finish_reason ? Json(*finish_reason) : Json(nullptr)}};
  if (finish_reason) choice["stop_reason"] = stop_reason;
  return Json{{"id", h.id},
              {"object", "text_completion"},
              {"created", h.created},
              {"model", h.model},
              {"choices", Json::array({std::move(choice)})}};
}

Json usage_chunk_json(const ResponseHeader& h, bool chat, const Usage& usage) {
  return Json{{"id", h.id},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", h.created},
              {"model", h.model},
              {"choices", Json::array()},
              {"usage", usage_json(usage)}};
}

std::string sse_event(const Json& j) { return "data: " + dump_json(j) + "\n\n"; }

std::string sse_event(std::string_view name, const Json& j) {
  return "event: " + std::string(name) + "\n" + sse_event(j);
}

}  // namespace ds::server
