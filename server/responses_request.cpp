#include "server/responses_request.h"

#include <string>

#include "server/api_error.h"
#include "server/chat_messages.h"
#include "server/field_path.h"
#include "server/request_params.h"

namespace ds::server {

namespace {

bool present(const Json& obj, const char* key) { return obj.contains(key) && !obj[key].is_null(); }

// Message content, or a function_call_output's output: a string, or text parts.
std::string text_of(const Json& content, const std::string& where) {
  return text_parts(content, where, {"input_text", "output_text", "text"});
}

// A reasoning item's text: its reasoning_text content, else its summary.
std::string reasoning_of(const Json& item, const std::string& where) {
  std::string text;
  for (const char* key : {"content", "summary"}) {
    if (!present(item, key)) continue;
    const Json& parts = item[key];
    if (!parts.is_array()) throw bad_request("'" + where + "." + key + "' must be a list", where + "." + key);
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string w = field_path(where + "." + key, i);
      typed_object(parts[i], w);
      if (!text.empty()) text += "\n\n";
      text += string_field(parts[i], "text", w);
    }
    if (!text.empty()) break;
  }
  return text;
}

bool has_image(const Json& content) {
  if (!content.is_array()) return false;
  for (const Json& p : content)
    if (string_or_empty(p, "type") == "input_image") return true;
  return false;
}

// A user message's content with input_image parts, as chat parts (image_url for each image).
Json image_parts(const Json& content, const std::string& where) {
  Json parts = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string w = field_path(where, i);
    const Json& p = content[i];
    const std::string type = typed_object(p, w);
    if (type == "input_text" || type == "text") {
      parts.push_back(Json{{"type", "text"}, {"text", string_field(p, "text", w)}});
    } else if (type == "input_image") {
      if (present(p, "file_id")) throw unsupported_field(w + ".file_id", "images by file id (send image_url)");
      parts.push_back(Json{{"type", "image_url"},
                           {"image_url", {{"url", string_field(p, "image_url", w)}}},
                           {kClientField, w + ".image_url"}});
    } else {
      throw unsupported_field(w + ".type", "content parts of type '" + type + "' (input_text and input_image are accepted)");
    }
  }
  return parts;
}

// Builds the chat messages from the input items.
class Conversation {
 public:
  explicit Conversation(std::string system) : system_(std::move(system)) {}

  void message(const std::string& role, std::string text) {
    if (role == "system" || role == "developer") {
      if (messages_.empty()) {  // still in the opening system part
        if (!system_.empty() && !text.empty()) system_ += "\n\n";
        system_ += text;
        return;
      }
      push(Json{{"role", "system"}, {"content", std::move(text)}});
      return;
    }
    if (role == "assistant") {
      Json& a = assistant();
      if (!a["content"].get_ref<const std::string&>().empty() || a.contains("tool_calls")) {
        assistant_ = false;
        assistant()["content"] = std::move(text);
      } else {
        a["content"] = std::move(text);
      }
      return;
    }
    push(Json{{"role", role}, {"content", std::move(text)}});
  }

  // A user message with images: chat parts (image_parts).
  void user_parts(Json parts) { push(Json{{"role", "user"}, {"content", std::move(parts)}}); }

  void reasoning(std::string text) {
    if (assistant_ && (!messages_.back()["content"].get_ref<const std::string&>().empty() ||
                       messages_.back().contains("tool_calls") || messages_.back().contains("reasoning_content")))
      assistant_ = false;
    assistant()["reasoning_content"] = std::move(text);
  }

  void function_call(std::string call_id, std::string name, Json arguments) {
    Json& a = assistant();
    if (!a.contains("tool_calls")) a["tool_calls"] = Json::array();
    a["tool_calls"].push_back(Json{{"id", std::move(call_id)},
                                   {"type", "function"},
                                   {"function", {{"name", std::move(name)}, {"arguments", std::move(arguments)}}}});
  }

  void tool_output(std::string call_id, std::string text) {
    push(Json{{"role", "tool"}, {"tool_call_id", std::move(call_id)}, {"content", std::move(text)}});
  }

  Json take() {
    Json out = Json::array();
    if (!system_.empty()) out.push_back(Json{{"role", "system"}, {"content", std::move(system_)}});
    for (auto& m : messages_) out.push_back(std::move(m));
    return out;
  }

 private:
  void push(Json m) {
    assistant_ = false;
    messages_.push_back(std::move(m));
  }
  // The open assistant turn, or a new one.
  Json& assistant() {
    if (!assistant_) {
      messages_.push_back(Json{{"role", "assistant"}, {"content", ""}});
      assistant_ = true;
    }
    return messages_.back();
  }

  std::string system_;
  std::vector<Json> messages_;
  bool assistant_ = false;  // the last message is an assistant turn that items may extend
};

void add_item(Conversation& conv, const Json& item, const std::string& w) {
  if (!item.is_object()) throw bad_request("'" + w + "' must be an object", w);
  // An item without a type is a message (the "easy" input form).
  const std::string type = present(item, "type") ? string_field(item, "type", w) : "message";
  if (type == "message") {
    const std::string role = string_field(item, "role", w);
    if (role != "user" && role != "assistant" && role != "system" && role != "developer")
      throw bad_request("'" + w + ".role' must be user, assistant, system or developer", w + ".role");
    if (!item.contains("content")) throw bad_request("'" + w + ".content' is required", w + ".content");
    if (role == "user" && has_image(item["content"]))
      conv.user_parts(image_parts(item["content"], w + ".content"));
    else
      conv.message(role, text_of(item["content"], w + ".content"));
  } else if (type == "function_call") {
    const std::string& args = string_field(item, "arguments", w);
    Json parsed = parse_json(args);
    if (!parsed.is_object()) throw bad_request("'" + w + ".arguments' must be a JSON object in a string", w + ".arguments");
    conv.function_call(string_field(item, "call_id", w), string_field(item, "name", w), std::move(parsed));
  } else if (type == "function_call_output") {
    if (!item.contains("output")) throw bad_request("'" + w + ".output' is required", w + ".output");
    conv.tool_output(string_field(item, "call_id", w), text_of(item["output"], w + ".output"));
  } else if (type == "reasoning") {
    conv.reasoning(reasoning_of(item, w));
  } else if (type == "item_reference") {
    throw unsupported_field(w + ".type", "item references need stored responses; send the items themselves");
  } else {
    throw unsupported_field(w + ".type", "input items of type '" + type +
                                             "' (message, function_call, function_call_output and reasoning are accepted)");
  }
}

Json chat_tools(const Json& tools) {
  return map_objects(tools, "tools", [](const Json& t, const std::string& w) {
    const std::string type = string_field(t, "type", w);
    if (type != "function")
      throw unsupported_field(w + ".type", "tools of type '" + type + "' (only function tools are accepted)");
    Json parameters;
    if (present(t, "parameters")) {
      if (!t["parameters"].is_object())
        throw bad_request("'" + w + ".parameters' must be a JSON Schema object", w + ".parameters");
      parameters = t["parameters"];
    }
    Json tool = chat_function_tool(t, w, std::move(parameters));
    if (auto strict = get_bool(t, "strict")) tool["function"]["strict"] = *strict;
    return tool;
  });
}

Json chat_tool_choice(const Json& tc) {
  if (tc.is_string()) {
    const std::string s = tc.get<std::string>();
    if (s != "auto" && s != "none" && s != "required")
      throw bad_request("'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\": ...}",
                        "tool_choice");
    return s;
  }
  if (!tc.is_object()) throw bad_request("'tool_choice' must be a string or an object", "tool_choice");
  const std::string type = string_field(tc, "type", "tool_choice");
  if (type != "function") throw unsupported_field("tool_choice", "tool choices of type '" + type + "'");
  return Json{{"type", "function"}, {"function", {{"name", string_field(tc, "name", "tool_choice")}}}};
}

// text.format -> response_format.
Json chat_response_format(const Json& format) {
  if (!format.is_object()) throw bad_request("'text.format' must be an object", "text.format");
  const std::string type = string_field(format, "type", "text.format");
  if (type != "json_schema") return Json{{"type", type}};
  Json schema = Json::object();
  for (const char* k : {"name", "description", "schema", "strict"})
    if (present(format, k)) schema[k] = format[k];
  return Json{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

}  // namespace

ResponsesRequest parse_responses_request(const Json& body) {
  if (present(body, "previous_response_id"))
    throw unsupported_field("previous_response_id", "responses are not stored; send the whole conversation in 'input'");
  if (get_bool(body, "store").value_or(false))
    throw unsupported_field("store", "responses are not stored; send \"store\": false (or leave it out)");
  if (get_bool(body, "background").value_or(false)) throw unsupported_field("background");
  for (const char* k : {"conversation", "prompt"})
    if (present(body, k)) throw unsupported_field(k);
  if (auto t = get_string(body, "truncation"); t && *t != "disabled")
    throw unsupported_field("truncation", "only \"disabled\" (a prompt beyond the context is a 400)");
  if (get_int(body, "top_logprobs").value_or(0) != 0) throw unsupported_field("top_logprobs");
  if (present(body, "include")) {
    const Json& inc = body["include"];
    if (!inc.is_array()) throw bad_request("'include' must be a list of strings", "include");
    for (const auto& x : inc)
      if (!x.is_string() || x.get<std::string>() != "reasoning.encrypted_content")
        throw unsupported_field("include", "only \"reasoning.encrypted_content\" (reasoning comes back as text)");
  }

  ResponsesRequest r;
  Json& chat = r.chat_body;
  Json& settings = r.settings;
  chat = Json::object();
  std::string instructions;
  if (auto i = get_string(body, "instructions")) instructions = *i;
  settings["instructions"] = present(body, "instructions") ? body["instructions"] : Json(nullptr);

  Conversation conv(instructions);
  if (!present(body, "input")) throw bad_request("'input' is required", "input");
  const Json& input = body["input"];
  if (input.is_string()) {
    conv.message("user", input.get<std::string>());
  } else if (input.is_array() && !input.empty()) {
    for (size_t i = 0; i < input.size(); ++i) add_item(conv, input[i], field_path("input", i));
  } else {
    throw bad_request("'input' must be a string or a non-empty list of items", "input");
  }
  chat["messages"] = conv.take();

  if (auto m = get_int(body, "max_output_tokens")) {
    if (*m < 1) throw bad_request("'max_output_tokens' must be at least 1", "max_output_tokens");
    chat["max_tokens"] = *m;
  }
  settings["max_output_tokens"] = present(body, "max_output_tokens") ? body["max_output_tokens"] : Json(nullptr);
  settings["parallel_tool_calls"] = get_bool(body, "parallel_tool_calls").value_or(true);

  Json kwargs = Json::object();
  if (present(body, "chat_template_kwargs")) {
    if (!body["chat_template_kwargs"].is_object())
      throw bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    kwargs = body["chat_template_kwargs"];
  }
  Json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (present(body, "reasoning")) {
    const Json& re = body["reasoning"];
    if (!re.is_object()) throw bad_request("'reasoning' must be an object", "reasoning");
    if (auto effort = get_string(re, "effort")) {
      const std::string& e = *effort;
      if (e != "none" && e != "minimal" && e != "low" && e != "medium" && e != "high" && e != "xhigh")
        throw bad_request("'reasoning.effort' must be none, minimal, low, medium, high or xhigh", "reasoning.effort");
      if (!kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = e != "none" && e != "minimal";
      // The chat path gives it its budget (thinking_setup.h).
      chat["reasoning_effort"] = e;
      reasoning["effort"] = e;
    }
    for (const char* k : {"summary", "generate_summary"})
      if (auto s = get_string(re, k)) reasoning["summary"] = *s;
  }
  settings["reasoning"] = std::move(reasoning);
  if (!kwargs.empty()) chat["chat_template_kwargs"] = std::move(kwargs);

  Json text = {{"format", {{"type", "text"}}}};
  if (present(body, "text")) {
    if (!body["text"].is_object()) throw bad_request("'text' must be an object", "text");
    text = body["text"];
    if (present(text, "format")) chat["response_format"] = chat_response_format(text["format"]);
  }
  settings["text"] = std::move(text);

  settings["tool_choice"] = "auto";
  if (present(body, "tool_choice")) {
    chat["tool_choice"] = chat_tool_choice(body["tool_choice"]);
    settings["tool_choice"] = body["tool_choice"];
  }
  settings["tools"] = Json::array();
  if (present(body, "tools")) {
    chat["tools"] = chat_tools(body["tools"]);
    settings["tools"] = body["tools"];
  }
  // vLLM's and SGLang's thinking budget fields pass through to the chat fields they are.
  for (const char* k : {"temperature", "top_p", "stream", "thinking_token_budget", "thinking_budget"})
    if (present(body, k)) chat[k] = body[k];
  settings["user"] = present(body, "user") ? body["user"] : Json(nullptr);
  settings["metadata"] = present(body, "metadata") ? body["metadata"] : Json::object();
  return r;
}

}  // namespace ds::server
