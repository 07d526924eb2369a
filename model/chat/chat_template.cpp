#include "model/chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/chat/parser.h"

namespace ds::chat {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TemplateError(std::string("cannot open ") + what + " " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw TemplateError(std::string("cannot read ") + what + " " + path.string());
  return ss.str();
}

nlohmann::ordered_json read_json(const fs::path& path) {
  const std::string text = read_file(path, "file");
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw TemplateError(path.string() + ": invalid JSON: " + e.what());
  }
}

// HF stores either one template or a list of named ones.
std::optional<std::string> template_field(const nlohmann::ordered_json& j, const fs::path& file) {
  if (!j.is_object() || !j.contains("chat_template") || j["chat_template"].is_null()) return std::nullopt;
  const auto& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    std::optional<std::string> first;
    for (const auto& entry : t) {
      if (!entry.is_object() || !entry.contains("template") || !entry["template"].is_string()) continue;
      if (!first) first = entry["template"].get<std::string>();
      if (entry.value("name", std::string()) == "default") return entry["template"].get<std::string>();
    }
    if (first) return first;
  }
  throw TemplateError(file.string() + ": \"chat_template\" must be a string or a list of {name, template}");
}

}  // namespace

nlohmann::ordered_json special_tokens_from_config(const nlohmann::ordered_json& config) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (!config.is_object()) return out;
  const auto token_text = [](const nlohmann::ordered_json& v) -> std::optional<std::string> {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string())
      return v["content"].get<std::string>();
    return std::nullopt;
  };
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    if (!config.contains(key)) continue;
    if (const auto t = token_text(config[key])) out[key] = *t;
  }
  if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& v : config["additional_special_tokens"])
      if (const auto t = token_text(v)) list.push_back(*t);
    out["additional_special_tokens"] = std::move(list);
  }
  return out;
}

ChatTemplate::ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

ChatTemplate ChatTemplate::from_source(std::string src, std::string name) {
  ChatTemplate t;
  t.parsed_ = std::make_unique<ParsedTemplate>(parse_template(src, name));
  t.source_ = std::move(src);
  return t;
}

ChatTemplate ChatTemplate::from_file(const std::string& path) {
  if (!fs::exists(path)) throw TemplateError("chat template file not found: " + path);
  return from_source(read_file(path, "chat template file"), path);
}

ChatTemplate ChatTemplate::from_model_dir(const std::string& dir,
                                          const std::optional<std::string>& override_file) {
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw TemplateError("model directory not found: " + dir);
  const fs::path config_path = root / "tokenizer_config.json";
  nlohmann::ordered_json config;
  if (fs::exists(config_path, ec)) config = read_json(config_path);

  std::optional<ChatTemplate> t;
  if (override_file) {
    t.emplace(from_file(*override_file));
  } else if (fs::exists(root / "chat_template.jinja", ec)) {
    t.emplace(from_file((root / "chat_template.jinja").string()));
  } else if (fs::exists(root / "chat_template.json", ec)) {
    const fs::path p = root / "chat_template.json";
    const auto src = template_field(read_json(p), p);
    if (!src) throw TemplateError(p.string() + ": no \"chat_template\" field");
    t.emplace(from_source(*src, p.string()));
  } else if (const auto src = template_field(config, config_path)) {
    t.emplace(from_source(*src, config_path.string() + " (chat_template)"));
  } else {
    throw TemplateError("no chat template in " + dir +
                        ": looked for chat_template.jinja, chat_template.json and the "
                        "\"chat_template\" field of tokenizer_config.json");
  }
  t->special_tokens_ = special_tokens_from_config(config);
  return std::move(*t);
}

const std::string& ChatTemplate::name() const { return parsed_->map->name(); }
const std::string& ChatTemplate::source() const { return source_; }

std::string ChatTemplate::render_variables(const nlohmann::ordered_json& variables) const {
  if (!variables.is_object()) throw TemplateRuntimeError("template variables must be a JSON object");
  const Value vars = Value::from_json(variables);
  Interpreter interp(*parsed_, limits_, vars);
  return interp.render();
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& kwargs,
                                 bool add_generation_prompt) const {
  if (!kwargs.is_null() && !kwargs.is_object())
    throw TemplateRuntimeError("chat template kwargs must be a JSON object");
  nlohmann::ordered_json vars = special_tokens_;
  if (kwargs.is_object())
    for (const auto& [k, v] : kwargs.items()) vars[k] = v;
  vars["messages"] = messages;
  vars["add_generation_prompt"] = add_generation_prompt;
  if (!vars.contains("tools")) vars["tools"] = nullptr;
  if (!vars.contains("documents")) vars["documents"] = nullptr;
  return render_variables(vars);
}

std::string ChatTemplate::render(const nlohmann::json& messages, const nlohmann::json& kwargs,
                                 bool add_generation_prompt) const {
  return render(nlohmann::ordered_json(messages), nlohmann::ordered_json(kwargs),
                add_generation_prompt);
}

}  // namespace ds::chat
