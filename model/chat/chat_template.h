// ChatTemplate: a model's chat template, rendered the way HF's apply_chat_template renders it,
// so that the prompt (and therefore the token ids) match HF exactly.
//
// Source, in order (from_model_dir):
//   1. `override_file` (the server's --chat-template FILE), if given;
//   2. DIR/chat_template.jinja;
//   3. DIR/chat_template.json {"chat_template": ...};
//   4. the "chat_template" field of DIR/tokenizer_config.json (a string, or HF's list of
//      {"name", "template"}, of which "default" is used).
// The special tokens of tokenizer_config.json (bos_token, eos_token, unk_token, pad_token,
// sep_token, cls_token, mask_token, additional_special_tokens; strings or {"content": ...}) are
// template variables, as in HF.
//
// render(messages, kwargs, add_generation_prompt) sets the variables HF sets: the special
// tokens, then every kwarg (tools, enable_thinking, ...; a kwarg overrides a special token),
// then messages, add_generation_prompt, and tools / documents (None when not given).
// Use nlohmann::ordered_json for messages and kwargs: tojson prints keys in insertion order,
// as Python does; the nlohmann::json overload has already lost that order (keys sorted).
//
// Errors (template_error.h): TemplateSyntaxError from the constructors, with the template's
// name (its file) and line:column; TemplateRuntimeError and TemplateRaisedError from render.
// Loading problems (missing files, bad JSON, no template) are TemplateError naming the file.
//
// A ChatTemplate is immutable after construction; render() may run on many threads at once.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/chat/interpreter.h"
#include "model/chat/template_error.h"

namespace ds::chat {

struct ParsedTemplate;

class ChatTemplate {
 public:
  static ChatTemplate from_model_dir(const std::string& dir,
                                     const std::optional<std::string>& override_file = {});
  static ChatTemplate from_file(const std::string& path);
  // `name` identifies the template in error messages.
  static ChatTemplate from_source(std::string src, std::string name);

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& kwargs,
                     bool add_generation_prompt) const;
  std::string render(const nlohmann::json& messages, const nlohmann::json& kwargs,
                     bool add_generation_prompt) const;

  // Renders with exactly these variables (a JSON object) and nothing else.
  std::string render_variables(const nlohmann::ordered_json& variables) const;

  const std::string& name() const;
  const std::string& source() const;
  // The special-token variables (a JSON object; empty unless loaded from a model directory).
  const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }
  void set_special_tokens(nlohmann::ordered_json tokens) { special_tokens_ = std::move(tokens); }
  void set_limits(const RenderLimits& limits) { limits_ = limits; }

 private:
  ChatTemplate();
  std::unique_ptr<ParsedTemplate> parsed_;
  std::string source_;
  nlohmann::ordered_json special_tokens_ = nlohmann::ordered_json::object();
  RenderLimits limits_;
};

// The special tokens of a tokenizer_config.json object, as template variables.
nlohmann::ordered_json special_tokens_from_config(const nlohmann::ordered_json& config);

}  // namespace ds::chat
