#include "server/chat_messages.h"

#include <algorithm>

#include "server/api_error.h"
#include "server/field_path.h"
#include "server/request_params.h"

namespace ds::server {

namespace {

// The URL of an image_url / video_url part (key): key {"url": ...} or a bare string.
std::string media_url(const Json& part, const std::string& at, const char* key = "image_url") {
  const auto it = part.find(key);
  if (it != part.end() && it->is_string()) return it->get<std::string>();
  if (it != part.end() && it->is_object() && it->contains("url") && (*it)["url"].is_string())
    return (*it)["url"].get<std::string>();
  throw bad_request("'" + at + "." + key + "' must be {\"url\": ...} or a URL string", at + "." + key);
}

// A message's content in template form: a string (text parts joined with "\n"), or, when it
// has images or videos, its parts with each image as {"type": "image"} and each video as
// {"type": "video"} (their URLs added to images / videos).
Json content_for_template(const Json& content, const std::string& where, std::vector<ImageRef>* images,
                          std::vector<ImageRef>* videos) {
  if (content.is_null()) return "";
  if (content.is_string()) return content;
  if (!content.is_array())
    throw bad_request("'" + where + "' must be a string or a list of content parts", where);
  std::string text;
  Json parts = Json::array();
  bool first = true, has_image = false;
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& part = content[j];
    const std::string at = where + "[" + std::to_string(j) + "]";
    std::string piece;
    if (part.is_string()) {  // lenient: a bare string part
      piece = part.get<std::string>();
    } else {
      if (!part.is_object()) throw bad_request("'" + at + "' must be a content part object", at);
      const std::string type = optional_string_field(part, "type", at);
      if (type == "image_url" && images) {
        // A part translated from another API names the client's own field (kClientField).
        const auto cf = part.find(kClientField);
        images->push_back({media_url(part, at), cf != part.end() && cf->is_string() ? cf->get<std::string>()
                                                                                     : at + ".image_url"});
        parts.push_back(Json{{"type", "image"}});
        has_image = true;
        continue;
      }
      if (type == "video_url" && videos) {
        videos->push_back({media_url(part, at, "video_url"), at + ".video_url"});
        parts.push_back(Json{{"type", "video"}});
        has_image = true;
        continue;
      }
      if (type != "text" && type != "input_text")
        throw unsupported_field(at + ".type", "content parts of type '" + type + "' (" +
                                                  (videos ? "text, image_url and video_url are"
                                                   : images ? "text and image_url are"
                                                            : "only text is") +
                                                  " accepted)");
      if (!part.contains("text") || !part["text"].is_string())
        throw bad_request("'" + at + ".text' must be a string", at + ".text");
      piece = part["text"].get<std::string>();
    }
    if (!first) text += '\n';
    text += piece;
    first = false;
    parts.push_back(Json{{"type", "text"}, {"text", std::move(piece)}});
  }
  if (has_image) return parts;
  return text;
}

}  // namespace

Json normalize_messages(const Json& messages, std::vector<ImageRef>* images, std::vector<ImageRef>* videos) {
  if (!messages.is_array() || messages.empty())
    throw bad_request("'messages' must be a non-empty list", "messages");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const Json& m = messages[i];
    if (!m.is_object()) throw bad_request("'" + at + "' must be an object", at);
    if (!m.contains("role") || !m["role"].is_string()) throw bad_request("'" + at + ".role' must be a string", at + ".role");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      throw bad_request("'" + at + ".role' must be system, developer, user, assistant or tool (got '" + role + "')",
                        at + ".role");
    Json n = m;  // keeps name, tool_call_id and any field a template may read
    n["role"] = role;
    if (!m.contains("content") || m["content"].is_null()) {
      if (role != "assistant") throw bad_request("'" + at + ".content' is required", at + ".content");
      n["content"] = "";
    } else {
      n["content"] = content_for_template(m["content"], at + ".content", images, videos);
    }
    if (role == "assistant") {
      if (!m.contains("reasoning_content") && m.contains("reasoning") && m["reasoning"].is_string())
        n["reasoning_content"] = m["reasoning"];
      if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
        if (!m["tool_calls"].is_array()) throw bad_request("'" + at + ".tool_calls' must be a list", at + ".tool_calls");
        Json calls = Json::array();
        for (size_t c = 0; c < m["tool_calls"].size(); ++c) {
          const std::string cat = at + ".tool_calls[" + std::to_string(c) + "]";
          Json call = m["tool_calls"][c];
          if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
            throw bad_request("'" + cat + "' must be {\"type\": \"function\", \"function\": {...}}", cat);
          Json& fn = call["function"];
          if (!fn.contains("name") || !fn["name"].is_string())
            throw bad_request("'" + cat + ".function.name' must be a string", cat + ".function.name");
          if (fn.contains("arguments") && fn["arguments"].is_string()) {
            auto parsed = parse_json(fn["arguments"].get<std::string>());
            if (parsed.is_discarded())
              throw bad_request("'" + cat + ".function.arguments' is not valid JSON", cat + ".function.arguments");
            fn["arguments"] = std::move(parsed);
          } else if (!fn.contains("arguments") || fn["arguments"].is_null()) {
            fn["arguments"] = Json::object();
          }
          calls.push_back(std::move(call));
        }
        n["tool_calls"] = std::move(calls);
      }
    }
    out.push_back(std::move(n));
  }
  return out;
}

void check_tool_name(const std::string& name, const std::string& where) {
  const bool ok = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (!ok)
    throw bad_request("'" + where + "' must be 1 to 64 characters of a-z, A-Z, 0-9, underscores and dashes", where);
}

ChatFields parse_chat_fields(const Json& body) {
  for (const char* k : {"functions", "function_call"})
    if (body.contains(k) && !body[k].is_null()) throw unsupported_field(k, "use 'tools' and 'tool_choice'");
  for (const char* k : {"audio", "prediction", "web_search_options"})
    if (body.contains(k) && !body[k].is_null()) throw unsupported_field(k);
  if (body.contains("modalities") && !body["modalities"].is_null()) {
    const Json& mod = body["modalities"];
    if (!mod.is_array()) throw bad_request("'modalities' must be a list", "modalities");
    for (const auto& x : mod)
      if (!x.is_string() || x.get<std::string>() != "text") throw unsupported_field("modalities", "only text output");
  }
  if (!body.contains("messages")) throw bad_request("'messages' is required", "messages");

  ChatFields f;
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object())
      throw bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    f.kwargs = body["chat_template_kwargs"];
  }

  if (body.contains("tools") && !body["tools"].is_null()) {
    const Json& tools = body["tools"];
    if (!tools.is_array()) throw bad_request("'tools' must be a list", "tools");
    for (size_t i = 0; i < tools.size(); ++i) {
      const std::string at = "tools[" + std::to_string(i) + "]";
      const Json& t = tools[i];
      if (!t.is_object() || !(!t.contains("type") || (t["type"].is_string() && t["type"] == "function")) ||
          !t.contains("function") || !t["function"].is_object() || !t["function"].contains("name") ||
          !t["function"]["name"].is_string())
        throw bad_request("'" + at + "' must be {\"type\": \"function\", \"function\": {\"name\": ...}}", at);
      check_tool_name(t["function"]["name"].get<std::string>(), at + ".function.name");
    }
    if (!tools.empty()) f.tools = tools;
  }
  std::string tool_choice = "auto";
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const Json& tc = body["tool_choice"];
    if (tc.is_object()) {
      const bool named = string_or_empty(tc, "type") == "function" && tc.contains("function") && tc["function"].is_object() &&
                         tc["function"].contains("name") && tc["function"]["name"].is_string();
      if (!named)
        throw bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or "
                          "{\"type\": \"function\", \"function\": {\"name\": ...}}",
                          "tool_choice");
      tool_choice = "function";
      f.forced_function = tc["function"]["name"].get<std::string>();
    } else if (tc.is_string()) {
      tool_choice = tc.get<std::string>();
      if (tool_choice != "auto" && tool_choice != "none" && tool_choice != "required")
        throw bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or a named function", "tool_choice");
    } else {
      throw bad_request("'tool_choice' must be a string or an object", "tool_choice");
    }
    if ((tool_choice == "required" || tool_choice == "function") && f.tools.is_null())
      throw bad_request("'tool_choice' forces a tool call, but the request has no 'tools'", "tool_choice");
    if (tool_choice == "function") {
      bool found = false;
      for (const Json& t : f.tools) found = found || t["function"]["name"].get<std::string>() == f.forced_function;
      if (!found)
        throw bad_request("'tool_choice' names the function '" + f.forced_function + "', which is not in 'tools'",
                          "tool_choice");
    }
    f.force_tool_call = tool_choice == "required" || tool_choice == "function";
  }
  f.parallel_tool_calls = get_bool(body, "parallel_tool_calls").value_or(true);
  if (!f.tools.is_null()) f.kwargs["tools"] = f.tools;
  f.parse_tool_calls = !f.tools.is_null() && tool_choice != "none";

  f.add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
  f.messages = normalize_messages(body["messages"], &f.images, &f.videos);
  return f;
}

}  // namespace ds::server
