#include "server/messages_request.h"

#include <string>
#include <string_view>
#include <vector>

#include "model/vision/decode.h"
#include "server/api_error.h"
#include "server/chat_messages.h"
#include "server/base64.h"
#include "server/field_path.h"
#include "server/request_params.h"

namespace ds::server {

namespace {

// A string, or a list of text blocks, as one text (blocks joined with "\n").
std::string text_of(const Json& content, const std::string& where) { return text_parts(content, where, {"text"}); }

Json user_message(std::string text) { return Json{{"role", "user"}, {"content", std::move(text)}}; }

// An image block as a chat image_url part: its base64 source as a data: URL, or its url.
Json image_part(const Json& b, const std::string& w) {
  const auto src = b.find("source");
  if (src == b.end() || !src->is_object()) throw bad_request("'" + w + ".source' must be an object", w + ".source");
  const std::string sw = w + ".source";
  const std::string kind = string_field(*src, "type", sw);
  std::string url, field = sw + ".url";
  if (kind == "base64") {
    const std::string& media = string_field(*src, "media_type", sw);
    if (media != "image/jpeg" && media != "image/png" && media != "image/gif" && media != "image/webp")
      throw bad_request("'" + sw + ".media_type' must be image/jpeg, image/png, image/gif or image/webp", sw + ".media_type");
    const std::string& data = string_field(*src, "data", sw);
    // As Anthropic's API does, the bytes must be what media_type says (sniffed from the first
    // 12 bytes: 16 base64 characters; a shorter or malformed payload fails later, when decoded).
    std::vector<uint8_t> head;
    if (data.size() >= 16 && decode_base64(std::string_view(data).substr(0, 16), head)) {
      const vision::ImageFormat f = vision::sniff_format(head);
      const char* actual = f == vision::ImageFormat::png    ? "image/png"
                           : f == vision::ImageFormat::jpeg ? "image/jpeg"
                           : f == vision::ImageFormat::webp ? "image/webp"
                           : f == vision::ImageFormat::gif  ? "image/gif"
                                                            : "";
      if (*actual && media != actual)
        throw bad_request("'" + sw + ".data' is " + std::string(vision::format_name(f)) +
                              " data, which does not match media_type " + media,
                          sw + ".data");
    }
    url = "data:" + media + ";base64," + data;
    field = sw + ".data";
  } else if (kind == "url") {
    url = string_field(*src, "url", sw);
  } else {
    throw unsupported_field(sw + ".type", "image sources of type '" + kind + "' (base64 and url are accepted)");
  }
  return Json{{"type", "image_url"}, {"image_url", {{"url", std::move(url)}}}, {kClientField, std::move(field)}};
}

// A tool_result's content for the "tool" message: its text (blocks joined with "\n"), or,
// when it holds image blocks (an agent's screenshot or image file), chat parts in order.
Json tool_result_content(const Json& b, const std::string& w, bool is_error) {
  const std::string cw = w + ".content";
  const auto c = b.find("content");
  bool images = false;
  if (c != b.end() && c->is_array())
    for (const Json& part : *c) images = images || string_or_empty(part, "type") == "image";
  if (!images) {
    std::string result = c != b.end() && !c->is_null() ? text_of(*c, cw) : "";
    return is_error ? "Error: " + result : result;
  }
  Json parts = Json::array();
  if (is_error) parts.push_back(Json{{"type", "text"}, {"text", "Error:"}});
  for (size_t i = 0; i < c->size(); ++i) {
    const std::string pw = field_path(cw, i);
    const std::string type = typed_object((*c)[i], pw);
    if (type == "text") parts.push_back(Json{{"type", "text"}, {"text", string_field((*c)[i], "text", pw)}});
    else if (type == "image") parts.push_back(image_part((*c)[i], pw));
    else throw unsupported_field(pw + ".type", "content of type '" + type + "' (text and image are accepted here)");
  }
  return parts;
}

// One user turn: its text and image blocks, and a "tool" message per tool_result, in block
// order. Text alone becomes one string (blocks joined with "\n"); with images, chat parts.
void add_user_turn(const Json& content, const std::string& where, Json& out) {
  if (content.is_string()) {
    out.push_back(user_message(content.get<std::string>()));
    return;
  }
  if (!content.is_array()) throw bad_request("'" + where + "' must be a string or a list of content blocks", where);
  std::string text;
  Json parts = Json::array();
  bool have_text = false, have_image = false, any = false;
  auto flush_text = [&] {
    if (have_image) out.push_back(Json{{"role", "user"}, {"content", std::move(parts)}});
    else if (have_text) out.push_back(user_message(std::move(text)));
    text.clear();
    parts = Json::array();
    have_text = have_image = false;
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string w = field_path(where, i);
    const Json& b = content[i];
    const std::string type = typed_object(b, w);
    if (type == "text") {
      if (have_text) text += '\n';
      const std::string& t = string_field(b, "text", w);
      text += t;
      parts.push_back(Json{{"type", "text"}, {"text", t}});
      have_text = true;
    } else if (type == "image") {
      parts.push_back(image_part(b, w));
      have_image = true;
    } else if (type == "tool_result") {
      flush_text();
      const bool is_error = get_bool(b, "is_error").value_or(false);
      out.push_back(Json{{"role", "tool"},
                         {"tool_call_id", string_field(b, "tool_use_id", w)},
                         {"content", tool_result_content(b, w, is_error)}});
      any = true;
    } else {
      throw unsupported_field(w + ".type", "content blocks of type '" + type + "' (text, image and tool_result are accepted)");
    }
  }
  if (have_text || have_image || !any) {
    have_text = true;
    flush_text();
  }
}

void add_assistant_turn(const Json& content, const std::string& where, Json& out) {
  Json msg = {{"role", "assistant"}, {"content", ""}};
  if (content.is_string()) {
    msg["content"] = content.get<std::string>();
    out.push_back(std::move(msg));
    return;
  }
  if (!content.is_array()) throw bad_request("'" + where + "' must be a string or a list of content blocks", where);
  std::string text, reasoning;
  Json calls = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string w = field_path(where, i);
    const Json& b = content[i];
    const std::string type = typed_object(b, w);
    if (type == "text") {
      if (!text.empty()) text += '\n';
      text += string_field(b, "text", w);
    } else if (type == "thinking") {
      reasoning += string_field(b, "thinking", w);
    } else if (type == "redacted_thinking") {
      continue;
    } else if (type == "tool_use") {
      auto input = b.find("input");
      if (input == b.end() || !input->is_object()) throw bad_request("'" + w + ".input' must be an object", w + ".input");
      calls.push_back(Json{{"id", string_field(b, "id", w)},
                           {"type", "function"},
                           {"function", {{"name", string_field(b, "name", w)}, {"arguments", *input}}}});
    } else {
      throw unsupported_field(w + ".type",
                              "content blocks of type '" + type + "' (text, thinking and tool_use are accepted)");
    }
  }
  msg["content"] = std::move(text);
  if (!reasoning.empty()) msg["reasoning_content"] = std::move(reasoning);
  if (!calls.empty()) msg["tool_calls"] = std::move(calls);
  out.push_back(std::move(msg));
}

Json chat_tools(const Json& tools) {
  return map_objects(tools, "tools", [](const Json& t, const std::string& w) {
    if (auto type = get_string(t, "type"); type && *type != "custom")
      throw unsupported_field(w + ".type", "tools of type '" + *type +
                                               "' (server and Anthropic-defined tools); define the tool with name, "
                                               "description and input_schema");
    auto schema = t.find("input_schema");
    if (schema == t.end() || !schema->is_object())
      throw bad_request("'" + w + ".input_schema' must be a JSON Schema object", w + ".input_schema");
    return chat_function_tool(t, w, *schema);
  });
}

Json chat_tool_choice(const Json& tc) {
  if (!tc.is_object()) throw bad_request("'tool_choice' must be an object with a 'type'", "tool_choice");
  const std::string type = string_field(tc, "type", "tool_choice");
  get_bool(tc, "disable_parallel_tool_use");  // type-checked; the model decides how many calls it makes
  if (type == "auto" || type == "none") return type;
  if (type == "any") return "required";
  if (type == "tool") return Json{{"type", "function"}, {"function", {{"name", string_field(tc, "name", "tool_choice")}}}};
  throw bad_request("'tool_choice.type' must be auto, any, tool or none", "tool_choice.type");
}

bool thinking_enabled(const Json& th) {
  if (!th.is_object()) throw bad_request("'thinking' must be an object with a 'type'", "thinking");
  const std::string type = string_field(th, "type", "thinking");
  if (auto budget = get_int(th, "budget_tokens"); budget && *budget < 1)
    throw bad_request("'thinking.budget_tokens' must be at least 1", "thinking.budget_tokens");
  if (type == "enabled" || type == "adaptive") return true;
  if (type == "disabled") return false;
  throw bad_request("'thinking.type' must be enabled, adaptive or disabled", "thinking.type");
}

}  // namespace

Json messages_to_chat_body(const Json& body, MessagesEndpoint endpoint) {
  for (const char* k : {"mcp_servers", "container"})
    if (body.contains(k) && !body[k].is_null() && !(body[k].is_array() && body[k].empty()))
      throw unsupported_field(k);

  Json chat = Json::object();
  Json messages = Json::array();
  if (body.contains("system") && !body["system"].is_null()) {
    std::string system = text_of(body["system"], "system");
    if (!system.empty()) messages.push_back(Json{{"role", "system"}, {"content", std::move(system)}});
  }
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    throw bad_request("'messages' must be a non-empty list", "messages");
  const Json& in = body["messages"];
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string w = field_path("messages", i);
    const Json& m = in[i];
    if (!m.is_object()) throw bad_request("'" + w + "' must be an object", w);
    const std::string role = string_field(m, "role", w);
    if (!m.contains("content")) throw bad_request("'" + w + ".content' is required", w + ".content");
    if (role == "user")
      add_user_turn(m["content"], w + ".content", messages);
    else if (role == "assistant")
      add_assistant_turn(m["content"], w + ".content", messages);
    else
      throw bad_request("'" + w + ".role' must be user or assistant (the system prompt goes in 'system')", w + ".role");
  }
  if (endpoint == MessagesEndpoint::create && string_or_empty(in.back(), "role") == "assistant")
    throw unsupported_field("messages", "a final assistant message (a prefilled reply to continue); end with a user turn");
  chat["messages"] = std::move(messages);

  if (body.contains("tools") && !body["tools"].is_null()) chat["tools"] = chat_tools(body["tools"]);
  if (body.contains("tool_choice") && !body["tool_choice"].is_null())
    chat["tool_choice"] = chat_tool_choice(body["tool_choice"]);

  Json kwargs = Json::object();
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object())
      throw bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    kwargs = body["chat_template_kwargs"];
  }
  const bool thinking = body.contains("thinking") && !body["thinking"].is_null() && thinking_enabled(body["thinking"]);
  if (!kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = thinking;
  // An enabled block's budget_tokens is enforced (thinking_setup.h); adaptive has none. vLLM's
  // and SGLang's budget fields pass through as the chat fields they are (and win).
  if (thinking && string_or_empty(body["thinking"], "type") == "enabled")
    if (auto budget = get_int(body["thinking"], "budget_tokens")) chat["thinking_token_budget"] = *budget;
  for (const char* k : {"thinking_token_budget", "thinking_budget"})
    if (body.contains(k) && !body[k].is_null()) chat[k] = body[k];
  chat["chat_template_kwargs"] = std::move(kwargs);

  if (endpoint == MessagesEndpoint::create) {
    if (!get_int(body, "max_tokens")) throw bad_request("'max_tokens' is required", "max_tokens");
    chat["max_tokens"] = body["max_tokens"];
  }
  for (const char* k : {"temperature", "top_p", "top_k", "stream"})
    if (body.contains(k) && !body[k].is_null()) chat[k] = body[k];
  if (body.contains("stop_sequences") && !body["stop_sequences"].is_null()) {
    const Json& s = body["stop_sequences"];
    if (!s.is_array()) throw bad_request("'stop_sequences' must be a list of strings", "stop_sequences");
    chat["stop"] = s;
  }
  return chat;
}

}  // namespace ds::server
